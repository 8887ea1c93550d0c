// Keep labkit outputs readable without a kernel: every labkit widget output carries
// labkit's final-state picture (text/html, image/png) and a marker mimetype. For those
// outputs this renderer draws the live widget when its model exists, and the picture when
// the model is gone (a reopened notebook whose widget state was not saved, a new kernel):
// instead of "Error displaying widget: model not found" or an empty "Loading widget...".
//
// After a page reload (the kernel alive), outputs can render before the notebook's
// widget manager is registered: the widget renderer made then is ipywidgets' placeholder,
// with no manager, and ipywidgets only hands the manager to renderers that are direct
// children of an output. So the live view is built again with the notebook's real widget
// factory once it is registered, and re-attaches to its kernel model as ipywidgets' own
// outputs do; the picture shows only when the model is really gone.
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { DocumentRegistry } from '@jupyterlab/docregistry';
import type { IRenderMimeRegistry } from '@jupyterlab/rendermime';
import type { IRenderMime } from '@jupyterlab/rendermime-interfaces';
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

/** Renders a labkit output: the live widget when it can, else the static picture. */
export class LabkitRenderer extends Panel implements IRenderMime.IRenderer {
  private _live: Panel | null = null;
  private _static = new Panel();
  private _observer: MutationObserver | null = null;
  private _timer = 0;
  private _poll = 0;
  private _modelId = '';
  private _factory: IRenderMime.IRendererFactory | null = null;

  constructor(
    private _options: IRenderMime.IRendererOptions,
    private _rendermime: IRenderMimeRegistry
  ) {
    super();
    this.addClass('lk-output');
    this._static.addClass('lk-static');
    this.addWidget(this._static);
  }

  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const data = model.data;
    await this._renderStatic(model);
    const widgetFactory = this._rendermime.getFactory(WIDGET_MIME);
    if (!data[WIDGET_MIME] || !widgetFactory) {
      this._show(false);
      return;
    }
    const modelId = (data[WIDGET_MIME] as { model_id?: string }).model_id ?? '';
    if (this._live && modelId === this._modelId && this.node.dataset.labkit === 'live') {
      // the same widget re-sent with a newer picture (a fit ended): keep the live view as
      // it is (zoom, toggles), only the picture behind it changes
      return;
    }
    this._modelId = modelId;
    if (!this._live) {
      this._live = new Panel();
      this._live.addClass('lk-live');
      this.insertWidget(0, this._live);
      this._observer = new MutationObserver(() => this._check());
      this._observer.observe(this._live.node, { childList: true, subtree: true, characterData: true });
    }
    await this._mountLive(model);
  }

  /** The widget renderer of the rendermime's current widget factory, in the live panel. */
  private async _mountLive(model: IRenderMime.IMimeModel, again = false): Promise<void> {
    if (!this._live) return;
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
    if (rendermime && !rendermime.getFactory(LABKIT_MIME)) {
      rendermime.addFactory(
        {
          safe: false,
          mimeTypes: [LABKIT_MIME],
          createRenderer: options => new LabkitRenderer(options, rendermime)
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
