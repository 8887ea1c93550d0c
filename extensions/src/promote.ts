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
  /** With "verify": the outcome of labkit promote --verify (labkit.promote.verify). */
  verification?: { outcome: string; summary: string; hidden?: string[] };
}

/** The options the Promote dialog asks for. */
export interface IPromoteOptions {
  verify: boolean;
  showResults: boolean;
}

/** POST /labkit/api/promote; returns the HTTP status with the JSON body. */
export async function requestPromote(
  path: string,
  force: boolean,
  settings: ServerConnection.ISettings = ServerConnection.makeSettings(),
  options: IPromoteOptions = { verify: false, showResults: false }
): Promise<{ status: number; reply: IPromoteReply }> {
  const url = URLExt.join(settings.baseUrl, 'labkit', 'api', 'promote');
  const body = { path, force, verify: options.verify, show_results: options.showResults };
  const response = await ServerConnection.makeRequest(
    url,
    { method: 'POST', body: JSON.stringify(body) },
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

/** The Promote dialog's body: "verify after writing" (on by default), "print results". */
class PromoteOptionsBody extends Widget implements Dialog.IBodyWidget<IPromoteOptions> {
  private _verify: HTMLInputElement;
  private _results: HTMLInputElement;

  constructor(path: string) {
    super({ node: document.createElement('div') });
    this.addClass('labkit-promote-options');
    const intro = document.createElement('p');
    intro.textContent = `Write a standalone script from ${path}.`;
    this.node.appendChild(intro);
    this._verify = this._checkbox(
      'labkit-promote-verify',
      'Verify after writing: run the notebook fresh and the script, compare what they print',
      true
    );
    this._results = this._checkbox(
      'labkit-promote-results',
      "Print each cell's displayed result in the script",
      false
    );
  }

  getValue(): IPromoteOptions {
    return { verify: this._verify.checked, showResults: this._results.checked };
  }

  private _checkbox(name: string, text: string, checked: boolean): HTMLInputElement {
    const label = document.createElement('label');
    label.style.display = 'block';
    const input = document.createElement('input');
    input.type = 'checkbox';
    input.name = name;
    input.checked = checked;
    label.appendChild(input);
    label.appendChild(document.createTextNode(` ${text}`));
    this.node.appendChild(label);
    return input;
  }
}

/** The report of what the script leaves out, one line per statement, as the CLI prints it. */
export function renderReport(
  lines: string[],
  warnings: string[],
  verification?: IPromoteReply['verification']
): Widget {
  const node = document.createElement('div');
  node.className = 'labkit-promote-report';
  if (verification) {
    const verdict = document.createElement('pre');
    verdict.className = 'labkit-promote-verification';
    verdict.dataset.outcome = verification.outcome;
    const hidden = (verification.hidden ?? []).map(h => `hidden state: ${h}`);
    verdict.textContent = [`verify: ${verification.summary}`, ...hidden].join('\n');
    node.appendChild(verdict);
  }
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
  const asked = await showDialog({
    title: 'labkit: Promote to script',
    body: new PromoteOptionsBody(path),
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Promote' })]
  });
  if (!asked.button.accept || !asked.value) {
    return;
  }
  const options = asked.value;
  const running = options.verify
    ? Notification.emit(`Promoting ${path} and verifying the script...`, 'in-progress', {
        autoClose: false
      })
    : null;
  let status: number;
  let reply: IPromoteReply;
  try {
    ({ status, reply } = await requestPromote(path, false, settings, options));
  } finally {
    if (running) {
      Notification.dismiss(running);
    }
  }
  if (status === 409) {
    const answer = await showDialog({
      title: 'labkit: replace the script?',
      body: `${reply.script} exists. Replace it with a new promotion of ${path}?`,
      buttons: [Dialog.cancelButton(), Dialog.warnButton({ label: 'Replace' })]
    });
    if (!answer.button.accept) {
      return;
    }
    ({ status, reply } = await requestPromote(path, true, settings, options));
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
  const verification = reply.verification;
  const showReport = {
    label: verification ? 'Verification and what was left out' : 'What was left out',
    callback: () => {
      void showDialog({
        title: `labkit: ${script}`,
        body: renderReport(lines, warnings, verification),
        buttons: [Dialog.okButton()]
      });
    }
  };
  if (verification && verification.outcome !== 'identical') {
    // not identical (or not verified): show it at once, with the report
    showReport.callback();
  }
  const counts = Object.entries(reply.report?.counts ?? {})
    .map(([reason, n]) => `${reason}: ${n}`)
    .join(', ');
  const verdict = verification ? `; verify: ${verification.summary.split('\n')[0]}` : '';
  const summary = (counts ? ` (${counts})` : '') + verdict;
  if (warnings.length) {
    Notification.warning(
      `Promoted to ${script} with warnings: ${warnings.join('; ')}${summary}`,
      { autoClose: false, actions: [showReport] }
    );
  } else {
    const more = counts || verification;
    Notification.success(`Promoted ${path} to ${script}${summary}`, {
      autoClose: more ? false : 5000,
      actions: more ? [showReport] : []
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
