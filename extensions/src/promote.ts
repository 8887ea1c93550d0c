// "Promote to script": turn the notebook into a standalone training script through the
// labkit server extension (POST /labkit/api/promote), then open the script in an editor.
// The notebook toolbar button and the file browser's context-menu entry are declared in
// schema/promote.json; the command palette entry is added here.
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import {
  Dialog,
  ICommandPalette,
  Notification,
  showDialog,
  showErrorMessage
} from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

export const PROMOTE_COMMAND = 'labkit:promote-to-script';

/** One finding, as labkit.promote.Problem.to_dict() sends it. */
export interface IProblem {
  severity: 'error' | 'warning';
  message: string;
  cell: number | null;
  name: string | null;
}

/** The body of a POST /labkit/api/promote answer. */
export interface IPromoteReply {
  script?: string;
  warnings?: string[];
  message?: string;
  problems?: IProblem[];
  /** What the script leaves out, by cell and line, grouped by reason (labkit.promote.report). */
  report_lines?: string[];
  report?: { counts?: Record<string, number> };
}

/** POST /labkit/api/promote; returns the HTTP status with the JSON body. */
export async function requestPromote(
  path: string,
  force: boolean,
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<{ status: number; reply: IPromoteReply }> {
  const url = URLExt.join(settings.baseUrl, 'labkit', 'api', 'promote');
  const response = await ServerConnection.makeRequest(
    url,
    { method: 'POST', body: JSON.stringify({ path, force }) },
    settings
  );
  let reply: IPromoteReply = {};
  try {
    reply = (await response.json()) as IPromoteReply;
  } catch {
    reply = { message: `POST ${url} answered ${response.status} without JSON` };
  }
  if (response.status === 404 && !reply.message) {
    reply.message =
      'The labkit server extension is not enabled; run `labkit doctor` in a terminal.';
  }
  return { status: response.status, reply };
}

/** The report of what the script leaves out, one line per statement, as the CLI prints it. */
export function renderReport(lines: string[], warnings: string[]): Widget {
  const node = document.createElement('div');
  node.className = 'labkit-promote-report';
  for (const warning of warnings) {
    const item = document.createElement('p');
    item.dataset.severity = 'warning';
    item.textContent = `warning: ${warning}`;
    node.appendChild(item);
  }
  const pre = document.createElement('pre');
  pre.textContent = lines.join('\n');
  pre.style.maxHeight = '50vh';
  pre.style.overflow = 'auto';
  node.appendChild(pre);
  return new Widget({ node });
}

/** A list of the problems (errors first), one row per problem, naming the cell. */
export function renderProblems(message: string, problems: IProblem[]): Widget {
  const node = document.createElement('div');
  node.className = 'labkit-promote-problems';
  const list = document.createElement('ul');
  const shown = problems.length ? problems : [{ severity: 'error', message } as IProblem];
  for (const problem of shown) {
    const item = document.createElement('li');
    item.dataset.severity = problem.severity;
    item.textContent = `${problem.severity}: ${problem.message}`;
    list.appendChild(item);
  }
  node.appendChild(list);
  const hint = document.createElement('p');
  hint.textContent = 'Nothing was written. Fix the cells named above, save, and promote again.';
  node.appendChild(hint);
  return new Widget({ node });
}

// --- which notebook: the file browser's selection (context menu) or the current tab ----

interface IDocumentLike {
  context?: { path?: string; model?: { dirty?: boolean }; save?: () => Promise<void> };
}

interface IBrowserLike {
  id: string;
  selectedItems?: () => Iterable<{ path: string; type: string }>;
}

function selectedNotebook(app: JupyterFrontEnd): string | null {
  const hit = app.contextMenuHitTest(node => node.classList.contains('jp-DirListing-item'));
  if (!hit) {
    return null;
  }
  for (const widget of app.shell.widgets('left')) {
    const browser = widget as unknown as IBrowserLike;
    if (browser.id === 'filebrowser' && browser.selectedItems) {
      for (const item of browser.selectedItems()) {
        if (item.type === 'notebook' || item.path.endsWith('.ipynb')) {
          return item.path;
        }
      }
    }
  }
  return null;
}

async function currentNotebook(app: JupyterFrontEnd): Promise<string | null> {
  const doc = app.shell.currentWidget as unknown as IDocumentLike | null;
  const context = doc?.context;
  if (!context?.path || !context.path.endsWith('.ipynb')) {
    return null;
  }
  if (context.model?.dirty && context.save) {
    await context.save(); // promote reads the file: include the latest edits and counts
  }
  return context.path;
}

async function promote(app: JupyterFrontEnd, path: string): Promise<void> {
  const settings = app.serviceManager.serverSettings;
  let { status, reply } = await requestPromote(path, false, settings);
  if (status === 409) {
    const answer = await showDialog({
      title: 'labkit: replace the script?',
      body: `${reply.script} exists. Replace it with a new promotion of ${path}?`,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Replace' })]
    });
    if (!answer.button.accept) {
      return;
    }
    ({ status, reply } = await requestPromote(path, true, settings));
  }
  if (status !== 200 || !reply.script) {
    await showDialog({
      title: `labkit: cannot promote ${path}`,
      body: renderProblems(reply.message ?? `error ${status}`, reply.problems ?? []),
      buttons: [Dialog.okButton()]
    });
    return;
  }
  await app.commands.execute('docmanager:open', { path: reply.script, factory: 'Editor' });
  const warnings = reply.warnings ?? [];
  const lines = reply.report_lines ?? [];
  const script = reply.script;
  const showReport = {
    label: 'What was left out',
    callback: () => {
      void showDialog({
        title: `labkit: ${script} leaves out`,
        body: renderReport(lines, warnings),
        buttons: [Dialog.okButton()]
      });
    }
  };
  const counts = Object.entries(reply.report?.counts ?? {})
    .map(([reason, n]) => `${reason}: ${n}`)
    .join(', ');
  const summary = counts ? ` (${counts})` : '';
  if (warnings.length) {
    Notification.warning(
      `Promoted to ${script} with warnings: ${warnings.join('; ')}${summary}`,
      { autoClose: false, actions: [showReport] }
    );
  } else {
    Notification.success(`Promoted ${path} to ${script}${summary}`, {
      autoClose: counts ? false : 5000,
      actions: counts ? [showReport] : []
    });
  }
}

export const promotePlugin: JupyterFrontEndPlugin<void> = {
  id: 'labkit:promote',
  description: 'labkit: promote a notebook to a standalone training script.',
  autoStart: true,
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, palette: ICommandPalette | null) => {
    app.commands.addCommand(PROMOTE_COMMAND, {
      label: 'Promote to script',
      caption: 'Write a standalone training script from this notebook and open it',
      execute: async args => {
        try {
          const path =
            (args.path as string | undefined) ??
            selectedNotebook(app) ??
            (await currentNotebook(app));
          if (!path) {
            await showErrorMessage(
              'labkit: Promote to script',
              'Open a notebook (or right-click one in the file browser) first.'
            );
            return;
          }
          await promote(app, path);
        } catch (error) {
          await showErrorMessage('labkit: Promote to script failed', error as Error);
        }
      }
    });
    palette?.addItem({ command: PROMOTE_COMMAND, category: 'labkit' });
  }
};
