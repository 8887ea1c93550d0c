// Fetch the labkit doctor report from the server extension and render it.
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import { Widget } from '@lumino/widgets';

/** One piece of the environment, as labkit.doctor.Check serializes it. */
export interface ICheck {
  name: string;
  status: 'ok' | 'missing' | 'broken';
  detail: string;
  required: boolean;
  fix: string;
}

/** The body of GET /labkit/api/doctor. */
export interface IReport {
  ok: boolean;
  checks: ICheck[];
}

/** GET /labkit/api/doctor; throws with the fix when the endpoint is absent. */
export async function requestDoctor(
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<IReport> {
  const url = URLExt.join(settings.baseUrl, 'labkit', 'api', 'doctor');
  const response = await ServerConnection.makeRequest(url, {}, settings);
  if (!response.ok) {
    throw new ServerConnection.ResponseError(
      response,
      `GET ${url} answered ${response.status}. Is the labkit server extension ` +
        'enabled? Run `labkit doctor` in a terminal, or `make lab` in the checkout.'
    );
  }
  return (await response.json()) as IReport;
}

/** A table with one row per check: status, name, detail and fix. */
export function renderReport(report: IReport): Widget {
  const node = document.createElement('div');
  node.className = 'labkit-doctor';
  const summary = document.createElement('p');
  summary.textContent = report.ok
    ? 'All required pieces are ready.'
    : 'Some required pieces are not ready; each row says how to fix it.';
  node.appendChild(summary);
  const table = document.createElement('table');
  for (const check of report.checks) {
    const row = table.insertRow();
    row.dataset.status = check.status;
    row.dataset.name = check.name;
    const status = check.required || check.status === 'ok' ? check.status : `${check.status} (optional)`;
    for (const text of [status, check.name, check.detail, check.status === 'ok' ? '' : check.fix]) {
      row.insertCell().textContent = text;
    }
  }
  node.appendChild(table);
  return new Widget({ node });
}
