// Keep labkit outputs readable without a kernel: every labkit widget output carries
// labkit's final-state picture (image/png, text/plain) and a marker mimetype. For those
// outputs this renderer draws the live widget when its model exists, and the picture when
// the model is gone (a reopened notebook whose widget state was not saved, a new kernel):
// instead of "Error displaying widget: model not found" or an empty "Loading widget...".
//
// Whether the model exists is asked before any widget view is made, so a normal reopen
// logs nothing: the page knows the widget's comm (shown in this page, or restored by
// ipywidgets), or the kernel lists it (comm_info: the restore is on its way), or, with a
// new kernel, it does not, and the picture stays, quietly. A kernel busy in a cell
// answers nothing (ipywidgets' restore waits for the cell's end too): a running fit's
// dashboard then carries a token, which this renderer posts to labkit's server extension
// (POST /labkit/api/reattach, as Stop does); a thread of the dashboard in the kernel sends
// the widget again as a comm_open, and the live view (progress, Stop) is drawn from it.
//
// The picture a fit leaves when it ends (update_display_data under its display id) does
// not reach a reloaded page through JupyterLab (the display id is not saved), so the
// renderer puts it into its own output when the message names its widget: the saved
// notebook keeps the final state, not the one of the fit's start.
//
// After a page reload, outputs can render before the notebook's widget manager is
// registered: the widget renderer made then is ipywidgets' placeholder, with no manager.
// So the live view is built again with the notebook's real widget factory once it is
// registered, and re-attaches to its kernel model as ipywidgets' own outputs do.
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import type { ISessionContext } from '@jupyterlab/apputils';
import { URLExt } from '@jupyterlab/coreutils';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import type { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { ServerConnection } from '@jupyterlab/services';
import type { Kernel, KernelMessage } from '@jupyterlab/services';
import { DisposableDelegate, IDisposable } from '@lumino/disposable';
import { Panel } from '@lumino/widgets';

// generated from labkit/views/_keep.py by scripts/gen_contract_types.py (one definition)
import { LABKIT_MIME } from './mime';

export { LABKIT_MIME };
export const WIDGET_MIME = 'application/vnd.jupyter.widget-view+json';
// before the widget manager's own renderer (rank -10)
const RANK = -20;
// how long a widget may show nothing before the picture stands in for it
const EMPTY_MS = 1500;
// how often, and how long, to look for the notebook's widget manager after a reload
const FACTORY_POLL_MS = 200;
const FACTORY_WAIT_MS = 120_000;
// a kernel that does not answer comm_info within this is busy in a cell
const COMM_INFO_MS = 1500;
// how often, and how long, to wait for a widget's comm the kernel listed
const COMM_POLL_MS = 100;
const COMM_WAIT_MS = 30_000;

type LabkitMarker = { version?: number; view?: string; reattach?: string };

/** POST /labkit/api/reattach with a running fit's token; "" when the server took it. */
export async function requestReattach(
  token: string,
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<string> {
  const url = URLExt.join(settings.baseUrl, 'labkit', 'api', 'reattach');
  try {
    const r = await ServerConnection.makeRequest(
      url,
      { method: 'POST', body: JSON.stringify({ token }) },
      settings
    );
    return r.ok ? '' : `HTTP ${r.status}`;
  } catch (e) {
    return String(e);
  }
}

const sleep = (ms: number) => new Promise<void>(resolve => window.setTimeout(resolve, ms));

/** Renders a labkit output: the live widget when it can, else the static picture. */
export class LabkitRenderer extends Panel implements IRenderMime.IRenderer {
  private _live: Panel | null = null;
  private _static = new Panel();
  private _observer: MutationObserver | null = null;
  private _timer = 0;
  private _poll = 0;
  private _commPoll = 0;
  private _modelId = '';
  private _model: IRenderMime.IMimeModel | null = null;
  private _factory: IRenderMime.IRendererFactory | null = null;
  private _kernel: Kernel.IKernelConnection | null = null;

  constructor(
    private _options: IRenderMime.IRendererOptions,
    private _rendermime: IRenderMimeRegistry,
    private _session: ISessionContext | null = null
  ) {
    super();
    this.addClass('lk-output');
    this._static.addClass('lk-static');
    this.addWidget(this._static);
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data;
    this._model = model;
    await this._renderStatic(model);
    const widgetFactory = this._rendermime.getFactory(WIDGET_MIME);
    if (!data[WIDGET_MIME] || !widgetFactory) {
      this._show(false);
      return;
    }
    const modelId = (data[WIDGET_MIME] as { model_id?: string }).model_id ?? '';
    if (modelId === this._modelId && (this.node.dataset.labkit === 'live' || this._commPoll)) {
      // the same widget re-sent with a newer picture (a fit ended): keep the live view as
      // it is (zoom, toggles), only the picture behind it changes
      return;
    }
    this._modelId = modelId;
    if (!this._session) {
      await this._mountLive(model); // not in a notebook: as ipywidgets does
      return;
    }
    let kernel = this._kernelNow();
    if (!kernel) {
      this._show(false); // the picture until the model is known to exist
      await this._session.ready; // a reloaded page: the session connects after the outputs render
      kernel = this._kernelNow();
      if (this.isDisposed || modelId !== this._modelId) return;
    }
    this._listen(kernel);
    if (!kernel) return; // no kernel: the picture stays
    if (kernel.hasComm(modelId)) {
      await this._mountLive(model); // shown in this page, or already restored
      return;
    }
    this._show(false);
    await this._findModel(model, kernel);
  }

  /** The notebook's kernel connection now (null outside a notebook or without a kernel). */
  private _kernelNow(): Kernel.IKernelConnection | null {
    return this._session?.session?.kernel ?? null;
  }

  /** Asks whether the widget's model exists; mounts it when it does, quietly not otherwise. */
  private async _findModel(model: IRenderMime.IMimeModel, kernel: Kernel.IKernelConnection): Promise<void> {
    const id = this._modelId;
    const info = kernel
      .requestCommInfo({ target_name: 'jupyter.widget' })
      .then(reply => reply.content, () => null);
    let reply = await Promise.race([info, sleep(COMM_INFO_MS).then(() => undefined)]);
    if (this.isDisposed || id !== this._modelId) return;
    if (reply === undefined) {
      // busy in a cell: a running fit's dashboard is sent again on request
      const token = (model.data[LABKIT_MIME] as LabkitMarker | undefined)?.reattach;
      if (token) {
        this._waitComm(model, kernel);
        const problem = await requestReattach(token);
        this.node.dataset.reattach = problem || 'requested';
      }
      reply = await info; // answered when the cell ends
      if (this.isDisposed || id !== this._modelId || this.node.dataset.labkit === 'live') return;
    }
    if (reply && reply.status === 'ok' && id in reply.comms) this._waitComm(model, kernel);
    // else: the model is gone (a new kernel): the picture stays, and nothing is logged
  }

  /** Mounts the live view once the page holds the widget's comm (restored or re-sent). */
  private _waitComm(model: IRenderMime.IMimeModel, kernel: Kernel.IKernelConnection): void {
    if (this._commPoll) return;
    const start = Date.now();
    this._commPoll = window.setInterval(() => {
      const gone = this.isDisposed || Date.now() - start > COMM_WAIT_MS;
      if (gone || kernel.hasComm(this._modelId)) {
        window.clearInterval(this._commPoll);
        this._commPoll = 0;
        if (!gone) void this._mountLive(model, true);
      }
    }, COMM_POLL_MS);
  }

  /** Listens to the kernel for the picture of this widget re-sent under its display id. */
  private _listen(kernel: Kernel.IKernelConnection | null): void {
    if (kernel === this._kernel) return;
    this._kernel?.iopubMessage.disconnect(this._onIOPub, this);
    this._kernel = kernel;
    kernel?.iopubMessage.connect(this._onIOPub, this);
  }

  private _onIOPub(_: Kernel.IKernelConnection, msg: KernelMessage.IIOPubMessage): void {
    if (msg.header.msg_type !== 'update_display_data' || !this._model) return;
    const content = (msg as KernelMessage.IUpdateDisplayDataMsg).content;
    const widget = content.data[WIDGET_MIME] as { model_id?: string } | undefined;
    if (!widget || widget.model_id !== this._modelId || !content.data[LABKIT_MIME]) return;
    const now = this._model.data;
    const same = ['image/png', 'text/plain', LABKIT_MIME].every(
      k => JSON.stringify(now[k]) === JSON.stringify(content.data[k])
    );
    // a page that showed the output itself got it already; a reloaded one did not
    if (!same) this._model.setData({ data: content.data, metadata: content.metadata });
  }

  /** The widget renderer of the rendermime's current widget factory, in the live panel. */
  private async _mountLive(model: IRenderMime.IMimeModel, again = false): Promise<void> {
    if (!this._live) {
      this._live = new Panel();
      this._live.addClass('lk-live');
      this.insertWidget(0, this._live);
      this._observer = new MutationObserver(() => this._check());
      this._observer.observe(this._live.node, { childList: true, subtree: true, characterData: true });
    }
    this._live.widgets.forEach(w => w.dispose());
    this._factory = this._rendermime.getFactory(WIDGET_MIME) ?? null;
    const inner = this._rendermime.createRenderer(WIDGET_MIME);
    this._live.addWidget(inner);
    if (!again) this._show(true); // built again: the picture stays until the view is drawn
    window.clearTimeout(this._timer);
    this._timer = window.setTimeout(() => this._check(true), EMPTY_MS);
    this._watchFactory(model);
    await inner.renderModel(model);
    this._check();
  }

  /** Until the view is drawn: when the notebook's widget manager registers its own
   * factory (replacing the placeholder this view was made with), build the view again. */
  private _watchFactory(model: IRenderMime.IMimeModel): void {
    window.clearInterval(this._poll);
    const start = Date.now();
    this._poll = window.setInterval(() => {
      const drawn = (this._live?.node.firstElementChild?.childElementCount ?? 0) > 0;
      if (this.isDisposed || drawn || Date.now() - start > FACTORY_WAIT_MS) {
        window.clearInterval(this._poll);
        return;
      }
      const now = this._rendermime.getFactory(WIDGET_MIME);
      if (now && now !== this._factory) {
        window.clearInterval(this._poll);
        void this._mountLive(model, true);
      }
    }, FACTORY_POLL_MS);
  }

  /** Live widget drawn: show it; model missing (error or still empty): the picture. */
  private _check(timedOut = false): void {
    const node = this._live?.node;
    if (!node) return;
    // the widget renderer shows "Loading widget..." or an error as text; a view as an element
    const inner = node.firstElementChild;
    const drawn = inner !== null && inner.childElementCount > 0;
    const missing = /model not found/.test(node.textContent || '');
    if (drawn && !missing) this._show(true);
    else if (missing || timedOut) this._show(false);
  }

  private _show(live: boolean): void {
    this.node.dataset.labkit = live ? 'live' : 'static';
    if (this._live) this._live.setHidden(!live);
    this._static.setHidden(live);
  }

  private async _renderStatic(model: IRenderMime.IMimeModel): Promise<void> {
    this._static.widgets.forEach(w => w.dispose());
    for (const mime of ['text/html', 'image/png', 'text/plain']) {
      if (model.data[mime] === undefined || !this._rendermime.getFactory(mime)) continue;
      const renderer = this._rendermime.createRenderer(mime);
      this._static.addWidget(renderer);
      const only = this._rendermime.createModel({
        data: { [mime]: model.data[mime] },
        trusted: model.trusted,
        metadata: model.metadata
      });
      await renderer.renderModel(only);
      return;
    }
  }

  dispose(): void {
    window.clearTimeout(this._timer);
    window.clearInterval(this._poll);
    window.clearInterval(this._commPoll);
    this._kernel?.iopubMessage.disconnect(this._onIOPub, this);
    this._observer?.disconnect();
    super.dispose();
  }

  get options(): IRenderMime.IRendererOptions {
    return this._options;
  }
}

/** Adds the labkit renderer to each notebook's rendermime (where the widget one lives). */
class FallbackExtension implements DocumentRegistry.WidgetExtension {
  createNew(panel: any): IDisposable {
    const rendermime: IRenderMimeRegistry | undefined = panel?.content?.rendermime;
    const session: ISessionContext | null = panel?.sessionContext ?? null;
    if (rendermime && !rendermime.getFactory(LABKIT_MIME)) {
      rendermime.addFactory(
        {
          safe: false,
          mimeTypes: [LABKIT_MIME],
          createRenderer: options => new LabkitRenderer(options, rendermime, session)
        },
        RANK
      );
    }
    return new DisposableDelegate(() => undefined);
  }
}

export const fallbackPlugin: JupyterFrontEndPlugin<void> = {
  id: 'labkit:static-fallback',
  description: "Shows labkit's final-state picture where a widget's model is gone.",
  autoStart: true,
  activate: (app: JupyterFrontEnd) => {
    app.docRegistry.addWidgetExtension('Notebook', new FallbackExtension());
  }
};
