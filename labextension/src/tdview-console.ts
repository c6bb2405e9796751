import type { JupyterFrontEnd } from '@jupyterlab/application';
import { ToolbarButton } from '@jupyterlab/apputils';
import type { ConsolePanel } from '@jupyterlab/console';
import type { IDocumentManager } from '@jupyterlab/docmanager';
import type { Kernel, KernelSpec } from '@jupyterlab/services';
import { notebookIcon } from '@jupyterlab/ui-components';
import { UUID } from '@lumino/coreutils';

import { compareConsoleCode, compareSessionName, comparisonOfSession } from './compare';
import { tdviewIcon } from './icons';
import {
  baseName,
  consoleCode,
  notebookName,
  parentDir,
  rootRelative,
  viewVariable
} from './paths';

/** Session paths of tdview consoles start with this (they sit in the server root). */
const SESSION_PREFIX = 'tdview-';
/** A tdview console's session name: this, then the checkpoint's root-relative path (what
 * a console restored after a page reload is shown again from). */
const NAME_PREFIX = 'tdview: ';

/** The checkpoint a tdview console's session name records, or null. */
export function checkpointOfSession(name: string): string | null {
  if (!name.startsWith(NAME_PREFIX)) {
    return null;
  }
  try {
    return rootRelative(name.slice(NAME_PREFIX.length));
  } catch {
    return null;
  }
}

/**
 * Send this kernel connection's comm messages to the main shell, not to subshells.
 *
 * JupyterLab (4.4 and later) sends the comm messages of one comm target over one kernel
 * subshell, shared through a table keyed by kernel and target. A comm that closes looks
 * its entry up, awaits the subshell's id, asks the kernel to delete that subshell and
 * drops the entry, without checking whether a comm that opened during the await took
 * the entry meanwhile. That comm then sends to a subshell the kernel no longer has
 * ("Unknown subshell_id"), and the view never hears back. In a tdview console the
 * widget's comms open while the kernel and its widget manager are still starting, which
 * is when that happens; on the main shell every message is answered.
 */
export function commsOnMainShell(kernel: Kernel.IKernelConnection | null | undefined): void {
  const connection = kernel as { commsOverSubshells?: string } | null | undefined;
  if (connection && 'commsOverSubshells' in connection) {
    connection.commsOverSubshells = 'disabled';
  }
}
/** The class of a tdview console panel. */
export const PANEL_CLASS = 'tdview-console';
/** The class that makes the widget fill a scroll area's height (js/src/fill-height.ts):
 * given to the console's cells' area, so the view uses the panel's height. */
export const FILL_AREA = 'tdview-fill';

/** Whether a session is a tdview console's (by its name: a view or a comparison). */
export function isTDViewSession(name: string): boolean {
  return checkpointOfSession(name) !== null || comparisonOfSession(name) !== null;
}

/** The class of the line a tdview console shows until its view has drawn. */
export const STATUS_CLASS = 'tdview-console-status';

/** Whether `panel` is a tdview console (also one restored after a page reload). */
export function isTDViewConsole(panel: ConsolePanel): boolean {
  return baseName(panel.sessionContext.path).startsWith(SESSION_PREFIX);
}

/** The kernel spec a tdview console starts: the default one if it is Python. */
export function pythonKernel(specs: KernelSpec.ISpecModels | null): string | undefined {
  if (!specs) {
    return undefined;
  }
  const language = (name: string) => specs.kernelspecs[name]?.language.toLowerCase();
  if (language(specs.default) === 'python') {
    return specs.default;
  }
  return Object.keys(specs.kernelspecs).find(name => language(name) === 'python');
}

/** Where a new tdview console runs: the shared tdview kernel, or a new one. */
export interface OpenOptions {
  /** Start a kernel of its own ("Open in new tdview kernel"). */
  newKernel?: boolean;
}

/**
 * Opens checkpoints in tdview consoles: a code console whose first cell shows the
 * `TDView` widget, so loads land in that kernel and the user can go on typing there, or
 * open a notebook on the same kernel. The first console starts a Python kernel (a few
 * seconds, said in the panel); later ones open as new views in that running kernel (one
 * per server: a tdview console's kernel found among the server's sessions is used after
 * a page reload too), each bound to a name of its own (`view`, `view2` …), unless the
 * user asks for a new kernel.
 */
export class TDViewConsoles {
  readonly #app: JupyterFrontEnd;
  readonly #docManager: IDocumentManager;
  readonly #open = new Map<string, ConsolePanel>();
  readonly #checkpoints = new WeakMap<ConsolePanel, string>();
  /** The name each console's view is bound to in its kernel. */
  readonly #variables = new WeakMap<ConsolePanel, string>();
  /** The kernel later views open in, while its first console starts it. */
  #shared: Promise<Kernel.IModel | null> | null = null;
  /** Settles when the open before has chosen its kernel (see `#start`). */
  #choosing: Promise<void> = Promise.resolve();
  /** Kernels started on request ("Open in new tdview kernel"): not shared. */
  readonly #ownKernels = new Set<string>();
  /** The session paths of the consoles started on such kernels (known before their
   * kernel is). */
  readonly #ownSessions = new Set<string>();

  constructor(app: JupyterFrontEnd, docManager: IDocumentManager) {
    this.#app = app;
    this.#docManager = docManager;
  }

  /** Show `path` (relative to the server root) in a tdview console, reusing an open one. */
  async open(path: string, options: OpenOptions = {}): Promise<ConsolePanel> {
    const checkpoint = rootRelative(path);
    const name = `${NAME_PREFIX}${checkpoint}`;
    return this.#start(name, v => consoleCode(checkpoint, v), checkpoint, options);
  }

  /**
   * Compare checkpoint `a` (the older) with `b` in a tdview console,
   * `TDView(a, compare=b)`, reusing an open one; its notebook goes next to `b`.
   */
  async openCompare(a: string, b: string, options: OpenOptions = {}): Promise<ConsolePanel> {
    const [older, newer] = [rootRelative(a), rootRelative(b)];
    const name = compareSessionName(older, newer);
    return this.#start(name, v => compareConsoleCode(older, newer, v), newer, options);
  }

  /**
   * A console named `name` (the key of an open one too) that runs `code(variable)`
   * first: in the shared tdview kernel (started by the first console) unless `options`
   * asks for a new one. The panel says what it waits for until the view has drawn.
   */
  async #start(
    name: string,
    code: (variable: string) => string,
    checkpoint: string,
    options: OpenOptions
  ): Promise<ConsolePanel> {
    const existing = this.#open.get(name);
    if (existing && !existing.isDisposed && !options.newKernel) {
      this.#app.shell.activateById(existing.id);
      return existing;
    }
    // One open at a time chooses its kernel: a second file opened while the first
    // console starts the shared kernel waits for it, rather than start another.
    const turn = this.#choosing;
    let release = () => {};
    this.#choosing = new Promise<void>(resolve => {
      release = resolve;
    });
    await turn;
    let shared: Kernel.IModel | null = null;
    let panel: ConsolePanel;
    let ready: Promise<Kernel.IKernelConnection | null | undefined>;
    try {
      shared = options.newKernel ? null : await this.#sharedKernel();
      panel = await this.#create(name, shared);
      ready = panel.sessionContext.ready.then(() => panel.sessionContext.session?.kernel);
      if (!shared) {
        const started = ready.then(k => (k ? { id: k.id, name: k.name } : null));
        if (options.newKernel) {
          this.#ownSessions.add(panel.sessionContext.path);
          void started.then(model => model && this.#ownKernels.add(model.id));
        } else {
          this.#shared = started.catch(() => null);
        }
      }
    } finally {
      release();
    }
    const status = showStatus(
      panel,
      shared ? `Opening ${checkpoint} in the running tdview kernel…` : 'Starting a kernel…'
    );
    this.decorate(panel);
    const variable = viewVariable(this.#variablesOf(shared?.id ?? null, panel));
    this.#track(panel, name, checkpoint, variable);
    try {
      const kernel = await ready;
      commsOnMainShell(kernel);
      status.textContent = `Opening ${checkpoint}…`;
      await panel.console.inject(code(variable));
    } finally {
      status.remove();
    }
    return panel;
  }

  /** A console session named `name` on kernel `shared`, or on a new Python kernel. */
  async #create(name: string, shared: Kernel.IModel | null): Promise<ConsolePanel> {
    const { kernelspecs } = this.#app.serviceManager;
    await kernelspecs.ready;
    const spec = pythonKernel(kernelspecs.specs);
    const preference = shared
      ? { id: shared.id, name: shared.name }
      : spec
        ? { name: spec, shouldStart: true }
        : { language: 'python' };
    return this.#app.commands.execute('console:create', {
      // A session path in the root: the kernel's working directory is the server root,
      // the directory the checkpoint's path is relative to.
      path: `${SESSION_PREFIX}${UUID.uuid4()}`,
      name,
      kernelPreference: preference,
      activate: true
    });
  }

  /**
   * The kernel new views open in: the one the first console of this page started (or is
   * starting), else the kernel of a tdview console the server runs (opened before a
   * reload, or in another tab), else none (the next console starts it).
   */
  async #sharedKernel(): Promise<Kernel.IModel | null> {
    const sessions = this.#app.serviceManager.sessions;
    const known = this.#shared ? await this.#shared : null;
    try {
      await sessions.refreshRunning();
    } catch {
      return null; // the server cannot say: start a kernel
    }
    const running = [...sessions.running()];
    const alive = (id: string) => running.some(model => model.kernel?.id === id);
    if (known && alive(known.id)) {
      return known;
    }
    const found = running.find(
      model =>
        model.kernel &&
        isTDViewSession(model.name) &&
        !this.#ownSessions.has(model.path) &&
        !this.#ownKernels.has(model.kernel.id)
    );
    const kernel = found?.kernel ? { id: found.kernel.id, name: found.kernel.name } : null;
    this.#shared = Promise.resolve(kernel);
    return kernel;
  }

  /** The names the views of other open consoles hold in kernel `id` (null: a kernel
   * to start, where no view is yet). */
  #variablesOf(id: string | null, except?: ConsolePanel): string[] {
    if (id === null) {
      return [];
    }
    return [...this.#open.values()]
      .filter(p => p !== except && !p.isDisposed && p.sessionContext.session?.kernel?.id === id)
      .map(p => this.#variables.get(p) ?? 'view');
  }

  /**
   * A tdview console that JupyterLab restored after a page reload: the console is empty
   * (consoles keep no outputs), so show its checkpoint again, on the same kernel.
   */
  async restore(panel: ConsolePanel): Promise<void> {
    await panel.sessionContext.ready;
    const name = panel.sessionContext.name;
    const checkpoint = checkpointOfSession(name);
    const pair = comparisonOfSession(name);
    const [code, near] = pair
      ? [(v: string) => compareConsoleCode(pair[0], pair[1], v), pair[1]]
      : [checkpoint === null ? null : (v: string) => consoleCode(checkpoint, v), checkpoint];
    if (code === null || near === null || panel.isDisposed || this.#checkpoints.has(panel)) {
      return;
    }
    const kernel = panel.sessionContext.session?.kernel;
    const variable = viewVariable(this.#variablesOf(kernel?.id ?? null));
    this.#track(panel, name, near, variable);
    commsOnMainShell(kernel);
    if (panel.console.cells.length === 0) {
      await panel.console.inject(code(variable));
    }
  }

  /** Titles, the console's entry (by its session name; `checkpoint`: where its notebook
   * goes; `variable`: its view's name in the kernel), and the kernel's shutdown when the
   * last console (or notebook) on it closes. */
  #track(panel: ConsolePanel, name: string, checkpoint: string, variable: string): void {
    this.#checkpoints.set(panel, checkpoint);
    this.#variables.set(panel, variable);
    // The console titles its tab with the session's name after each run (the path), and
    // "Console" while its kernel starts: the tab names the checkpoint from the start.
    panel.title.label = name;
    panel.title.changed.connect(() => {
      if (panel.title.label === 'Console') {
        panel.title.label = name;
      }
    });
    this.#open.set(name, panel);
    // Noted while the panel lives: once it is disposed, its session connection is gone.
    let ids: { session: string; kernel: string } | null = null;
    const note = () => {
      const session = panel.sessionContext.session;
      if (session?.kernel) {
        ids = { session: session.id, kernel: session.kernel.id };
      }
    };
    panel.sessionContext.kernelChanged.connect((_, change) => {
      commsOnMainShell(change.newValue);
      note();
    });
    void panel.sessionContext.ready.then(note);
    panel.disposed.connect(() => {
      if (this.#open.get(name) === panel) {
        this.#open.delete(name);
      }
      if (ids) {
        void this.#shutdownUnlessShared(ids.session, ids.kernel);
      }
    });
  }

  /**
   * Shut a closed tdview console's session (and so its kernel, about 250 MB) down, unless
   * another session (a notebook or console opened on this kernel) still uses the kernel.
   */
  async #shutdownUnlessShared(sessionId: string, kernelId: string): Promise<void> {
    const sessions = this.#app.serviceManager.sessions;
    try {
      await sessions.refreshRunning();
      const others = [...sessions.running()].filter(
        model => model.id !== sessionId && model.kernel?.id === kernelId
      );
      if (others.length === 0) {
        await sessions.shutdown(sessionId);
      }
    } catch (error) {
      console.warn('tdview: could not shut the closed console\'s kernel down', error);
    }
  }

  /** Mark a tdview console and give it an "Open a notebook on this kernel" button. */
  decorate(panel: ConsolePanel): void {
    if (panel.hasClass(PANEL_CLASS)) {
      return;
    }
    panel.addClass(PANEL_CLASS);
    panel.console.node.querySelector('.jp-CodeConsole-content')?.classList.add(FILL_AREA);
    panel.title.icon = tdviewIcon;
    const button = new ToolbarButton({
      icon: notebookIcon,
      label: 'Notebook',
      tooltip: 'Open a notebook on this kernel',
      className: 'tdview-open-notebook',
      onClick: () => void this.openNotebook(panel)
    });
    panel.toolbar.insertItem(0, 'tdview-open-notebook', button);
  }

  /**
   * Create a notebook next to the checkpoint, named after it (`ckpt-tdview.ipynb`, then
   * `ckpt-tdview-2.ipynb` …), and connect it to `panel`'s kernel.
   */
  async openNotebook(panel: ConsolePanel): Promise<void> {
    await panel.sessionContext.ready;
    const kernel = panel.sessionContext.session?.kernel;
    if (!kernel) {
      throw new Error('tdview: this console has no kernel');
    }
    const checkpoint =
      this.#checkpoints.get(panel) ?? checkpointOfSession(panel.sessionContext.name);
    const path = checkpoint === null ? 'tdview.ipynb' : await this.#freeName(checkpoint);
    const contents = this.#app.serviceManager.contents;
    await contents.save(path, { type: 'notebook', format: 'json', content: emptyNotebook() });
    this.#docManager.open(path, 'default', { id: kernel.id, name: kernel.name });
  }

  /** The first notebook path next to `checkpoint` that does not exist yet. */
  async #freeName(checkpoint: string): Promise<string> {
    const contents = this.#app.serviceManager.contents;
    const dir = parentDir(checkpoint);
    for (let n = 1; n < 1000; n++) {
      const name = notebookName(baseName(checkpoint), n);
      const path = dir ? `${dir}/${name}` : name;
      try {
        await contents.get(path, { content: false });
      } catch {
        return path; // not there (or unreadable): take it
      }
    }
    throw new Error(`tdview: no free notebook name next to ${checkpoint}`);
  }
}

/** An empty nbformat 4 notebook on a Python kernel. */
function emptyNotebook(): Record<string, unknown> {
  return {
    cells: [],
    metadata: {
      kernelspec: { name: 'python3', display_name: 'Python 3', language: 'python' }
    },
    nbformat: 4,
    nbformat_minor: 5
  };
}

/**
 * A line at the top of a new tdview console saying what it waits for ("Starting a
 * kernel…", about 5 s); the caller removes it once the view has drawn.
 */
function showStatus(panel: ConsolePanel, text: string): HTMLElement {
  const status = document.createElement('div');
  status.className = STATUS_CLASS;
  status.setAttribute('role', 'status');
  status.textContent = text;
  Object.assign(status.style, {
    padding: '12px 16px',
    color: 'var(--jp-ui-font-color2, #616161)',
    fontSize: 'var(--jp-ui-font-size1, 13px)',
    fontStyle: 'italic'
  });
  const area = panel.console.node.querySelector('.jp-CodeConsole-content');
  (area ?? panel.console.node).prepend(status);
  return status;
}
