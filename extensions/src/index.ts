// labkit's JupyterLab extension: a "labkit: Check environment" command in the
// command palette and the Help menu that shows the server's doctor report.
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { Dialog, ICommandPalette, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { IMainMenu } from '@jupyterlab/mainmenu';

import { renderReport, requestDoctor } from './doctor';
import { fallbackPlugin } from './fallback';
import { promotePlugin } from './promote';

export const CHECK_COMMAND = 'labkit:check-environment';

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'labkit:plugin',
  description: 'labkit: check the environment (labkit doctor) from JupyterLab.',
  autoStart: true,
  optional: [ICommandPalette, IMainMenu],
  activate: (
    app: JupyterFrontEnd,
    palette: ICommandPalette | null,
    mainMenu: IMainMenu | null
  ) => {
    app.commands.addCommand(CHECK_COMMAND, {
      label: 'labkit: Check environment',
      caption: 'Libraries, devices, widget assets and extensions, with fixes',
      execute: async () => {
        try {
          const report = await requestDoctor(app.serviceManager.serverSettings);
          await showDialog({
            title: report.ok ? 'labkit: environment ready' : 'labkit: environment not ready',
            body: renderReport(report),
            buttons: [Dialog.okButton()]
          });
        } catch (error) {
          await showErrorMessage('labkit: Check environment failed', error as Error);
        }
      }
    });
    palette?.addItem({ command: CHECK_COMMAND, category: 'labkit' });
    mainMenu?.helpMenu.addGroup([{ command: CHECK_COMMAND }], 100);
  }
};

export default [plugin, promotePlugin, fallbackPlugin];
