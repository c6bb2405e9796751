/**
 * The load form: device, mode, variable name, pickle unlock, the bytes the subtree
 * takes next to the device's free memory, the equivalent Python line, and a Load
 * button that sends `load`, shows its progress, and can cancel it.
 *
 * One `LoadPanel` lives as long as the view; `setNode` points it at the selection. A
 * load that is running keeps running (and keeps its progress on show) when the
 * selection moves on. Devices are asked for only when the form is first opened, since
 * reading a GPU's free memory starts CUDA in the kernel (the kernel then imports its
 * loader, so that the Load click costs what the load costs).
 *
 * Progress shows only for a load that runs longer than `loadTiming.progressDelayMs`: a
 * load of 30 ms goes straight to its result. A variable name already bound in the
 * kernel is not replaced until the user confirms it: the kernel answers
 * `VariableBoundError` with what the name holds, and the form asks.
 */

import { CopyButton } from "./clipboard";
import { type DataSource, isCancelled, type ProgressInfo, ProtocolError } from "./data-source";
import { alertBox, button, el, errorText, option } from "./dom";
import { formatCount, humanBytes } from "./format";
import {
  type DeviceInfo,
  type LoadParams,
  type LoadResult,
  type Mode,
  type NodeDetails,
  type Options,
  UNLOADABLE_KINDS,
} from "./protocol";
import { identifierProblem, loadCode, loadTarget, suggestVariable } from "./python-code";
import { RanksView } from "./render-ranks";

/** What the form asks of its data: devices and the load (the compare view loads from
 * one side's checkpoint, render-compare-details.ts). */
export type LoadSource = Pick<DataSource, "devices" | "load">;

export interface LoadPanelOptions {
  /** The checkpoint path as the user gave it (the first argument of the code line). */
  source: string;
  /** The widget's defaults (the `options` trait). */
  options: Options;
  /** Starts open (the form shows without a click). */
  open?: boolean;
}

const MODES: { value: string; mode: Mode; label: string }[] = [
  { value: "r", mode: "r", label: "r (read-only)" },
  { value: "r+", mode: "r+", label: "r+ (writable)" },
  { value: "default", mode: null, label: "default" },
];

/** How long a load runs before its progress and Cancel button show (a setting, so that
 * tests can show them at once). */
export const loadTiming = { progressDelayMs: 500 };

/** The kernel's answer to a load that would rebind a name without `replace`. */
export const VARIABLE_BOUND = "VariableBoundError";

const PICKLE_HINT =
  "This subtree holds pickled data. If you trust this file, tick " +
  "“Unlock pickles for this load” and load again.";

/**
 * Why a node of a collection's own tree cannot be loaded (the kernel refuses it with a
 * SubpathError), or null for a node that can: a member checkpoint loads whole.
 */
export function loadRefusal(node: NodeDetails): string | null {
  if (!UNLOADABLE_KINDS.has(node.kind)) return null;
  switch (node.kind) {
    case "json":
      return "A JSON file beside the checkpoints: its value is shown above; tdview does not load it.";
    case "pickle":
      return "A pickle file beside the checkpoints: tdview never unpickles it, so it is not loaded from here.";
    default:
      return "A folder is not loaded whole: select a checkpoint in it, or a node inside one, to load that.";
  }
}

/** What the memory line says: needed bytes against the device's free memory (`asking`:
 * the kernel's first device list is on its way: it imports torch, a second or two). */
export function memoryFit(
  bytes: number | null,
  device: DeviceInfo | undefined,
  mode: Mode,
  pending = false,
  asking = false,
): { text: string; warning: string | null } {
  const name = device?.name ?? "";
  if (name === "meta")
    return { text: "meta: shapes and dtypes only, no data is read", warning: null };
  if (bytes === null && pending) return { text: "Summing the subtree's size…", warning: null };
  if (bytes === null) return { text: "No tensor data", warning: null };
  const need = `Needs ${humanBytes(bytes)}`;
  const free = device?.free_bytes ?? null;
  if (free === null && asking) return { text: `${need} · reading the devices…`, warning: null };
  if (free === null)
    return { text: `${need} · free memory of ${name || "the device"} unknown`, warning: null };
  const total = device?.total_bytes;
  const text = `${need} · ${name}: ${humanBytes(free)} free${total ? ` of ${humanBytes(total)}` : ""}`;
  if (bytes <= free) return { text, warning: null };
  let warning = `${humanBytes(bytes)} will not fit in the ${humanBytes(free)} free on ${name}.`;
  if (name === "cpu" && mode !== null) {
    warning += " Memory-mapped leaves are read as they are used, so a map may still work.";
  }
  return { text, warning };
}

/** Text with its `backquoted` parts as code elements. */
function codeSpans(text: string): (string | HTMLElement)[] {
  return text.split("`").map((part, i) => (i % 2 === 1 ? el("code", "", part) : part));
}

function labelled(text: string, control: HTMLElement): HTMLLabelElement {
  const label = el("label", "tdview-field");
  label.append(el("span", "tdview-field-label", text), control);
  return label;
}

function liveRegion<K extends "div" | "span">(tag: K, className: string): HTMLElementTagNameMap[K] {
  const region = el(tag, className);
  region.setAttribute("aria-live", "polite");
  return region;
}

function modeSelect(mode: Mode): HTMLSelectElement {
  const select = el("select", "tdview-select tdview-mode");
  for (const m of MODES) select.append(option(m.label, m.value));
  select.title =
    "r: copy-on-write maps, files never change; r+: writes reach the files; " +
    "default (None): archives as r, writable directory files as r+";
  select.value = MODES.find((m) => m.mode === mode)?.value ?? "r";
  return select;
}

function variableInput(): HTMLInputElement {
  const input = el("input", "tdview-input tdview-variable");
  input.type = "text";
  input.spellcheck = false;
  input.autocomplete = "off";
  input.placeholder = "optional";
  input.title =
    "The kernel variable to bind the result to (empty: only the view's .value keeps it)";
  return input;
}

function unlockCheckbox(): [HTMLLabelElement, HTMLInputElement] {
  const box = el("input", "tdview-unlock");
  box.type = "checkbox";
  const field = el("label", "tdview-field tdview-unlock-field");
  field.append(box, el("span", "", "Unlock pickles for this load"));
  field.title =
    "Unpickling can run arbitrary code: only unlock a checkpoint you trust (allow_pickle=True)";
  return [field, box];
}

export class LoadPanel {
  readonly element: HTMLElement;
  /** Called when the pickle unlock changes (the details' lock box follows it). */
  onPickleChange: ((allowed: boolean) => void) | null = null;
  readonly #data: LoadSource;
  readonly #source: string;
  #defaults: Options;
  readonly #toggle: HTMLButtonElement;
  readonly #body: HTMLElement;
  readonly #device: HTMLSelectElement;
  readonly #mode: HTMLSelectElement;
  readonly #variable: HTMLInputElement;
  readonly #variableProblem: HTMLElement;
  readonly #unlockField: HTMLLabelElement;
  readonly #unlock: HTMLInputElement;
  readonly #memory: HTMLElement;
  readonly #code: HTMLElement;
  readonly #copy: CopyButton;
  readonly #loadButton: HTMLButtonElement;
  readonly #cancelButton: HTMLButtonElement;
  readonly #status: HTMLElement;
  /** "On N ranks": each rank's rows and the torchrun script (render-ranks.ts). */
  readonly #ranks = new RanksView();
  /** Why the node on show cannot be loaded (a folder or a side file of a collection). */
  readonly #refusal: HTMLElement;
  /** What hides while a node cannot be loaded: the fields, the memory and the code. */
  readonly #loadable: HTMLElement[] = [];
  #node: NodeDetails | null = null;
  #devices: DeviceInfo[] = [];
  #devicesAbort: AbortController | null = null;
  #running: { abort: AbortController; label: string; shown: boolean } | null = null;
  /** The question on show: replace the name that the kernel said is bound? */
  #confirm: HTMLElement | null = null;
  /** The code the kernel returned for the last load, until the form changes. */
  #resultCode: string | null = null;

  constructor(data: LoadSource, options: LoadPanelOptions) {
    this.#data = data;
    this.#source = options.source;
    this.#defaults = options.options;
    this.element = el("section", "tdview-section tdview-load");
    this.element.setAttribute("aria-label", "Load");
    this.#toggle = button("Load into the kernel", "tdview-disclosure", () =>
      this.setOpen(!this.isOpen),
    );
    this.#body = el("div", "tdview-load-body");
    this.#device = el("select", "tdview-select tdview-device");
    this.#device.append(option(this.#defaults.device, this.#defaults.device));
    this.#mode = modeSelect(this.#defaults.mode);
    this.#variable = variableInput();
    this.#variableProblem = liveRegion("span", "tdview-field-problem");
    [this.#unlockField, this.#unlock] = unlockCheckbox();
    this.#memory = liveRegion("div", "tdview-memory");
    this.#code = el("code", "tdview-code");
    this.#copy = new CopyButton("Copy code", () => this.code, { title: "Copy the Python line" });
    this.#loadButton = button("Load", "tdview-primary tdview-load-button", () => void this.load());
    this.#cancelButton = button("Cancel", "tdview-cancel-button", () => this.cancel());
    this.#cancelButton.hidden = true;
    this.#status = liveRegion("div", "tdview-load-status");
    this.#refusal = el("p", "tdview-note tdview-load-refusal");
    this.#layout();
    this.#listen();
    this.setOpen(options.open ?? false);
    this.setNode(null);
  }

  #layout(): void {
    const bodyId = `tdview-load-${Math.random().toString(36).slice(2)}`;
    this.#body.id = bodyId;
    this.#toggle.setAttribute("aria-controls", bodyId);
    const head = el("h3", "tdview-section-head tdview-section-title");
    head.append(this.#toggle);
    const variableField = labelled("Variable", this.#variable);
    variableField.classList.add("tdview-variable-field");
    variableField.hidden = this.#defaults.can_bind === false; // no namespace to bind in
    variableField.append(this.#variableProblem);
    const fields = el("div", "tdview-load-fields");
    fields.append(labelled("Device", this.#device), labelled("Mode", this.#mode), variableField);
    const codeRow = el("div", "tdview-code-row");
    codeRow.append(this.#code, this.#copy.element);
    const actions = el("div", "tdview-actions");
    actions.append(this.#loadButton, this.#cancelButton);
    this.#loadable.push(fields, this.#memory, codeRow);
    this.#body.append(fields, this.#unlockField, this.#memory, codeRow, this.#ranks.element);
    this.#body.append(this.#refusal);
    this.#body.append(actions, this.#status);
    this.element.append(head, this.#body);
  }

  #listen(): void {
    for (const control of [this.#device, this.#mode, this.#unlock]) {
      control.addEventListener("change", this.#formChanged);
    }
    this.#unlock.addEventListener("change", () => this.onPickleChange?.(this.allowPickle));
    this.#variable.addEventListener("input", this.#formChanged);
    this.#variable.addEventListener("input", () => this.#dropConfirm());
    this.#variable.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        void this.load();
      }
    });
  }

  get isOpen(): boolean {
    return this.#toggle.getAttribute("aria-expanded") === "true";
  }

  get allowPickle(): boolean {
    return this.#unlock.checked;
  }

  get isRunning(): boolean {
    return this.#running !== null;
  }

  /** The code line on show: the kernel's after a load, else built from the form. */
  get code(): string {
    return this.#resultCode ?? loadCode(this.#args());
  }

  /** Opens or closes the form; opening asks the kernel for its devices. */
  setOpen(open: boolean): void {
    this.#toggle.setAttribute("aria-expanded", String(open));
    this.#body.hidden = !open;
    if (open) void this.refreshDevices();
  }

  /**
   * New defaults (the widget's `options` trait changed in the kernel): the device, mode
   * and pickle pickers follow them.
   */
  setDefaults(options: Options): void {
    this.#defaults = options;
    const field = this.#variable.closest<HTMLElement>(".tdview-variable-field");
    if (field) field.hidden = options.can_bind === false;
    if (![...this.#device.options].some((o) => o.value === options.device)) {
      this.#device.append(option(options.device, options.device));
    }
    this.#device.value = options.device;
    this.#mode.value = MODES.find((m) => m.mode === options.mode)?.value ?? "r";
    this.#unlock.checked = options.allow_pickle;
    this.onPickleChange?.(this.allowPickle);
    this.#update();
  }

  /** Points the form at a node (null: nothing selected, or its details failed). */
  setNode(node: NodeDetails | null): void {
    const same = node !== null && JSON.stringify(node.path) === JSON.stringify(this.#node?.path);
    this.#node = node;
    if (!same) {
      this.#variable.value = node ? suggestVariable(node.path) : "";
      this.#unlock.checked = this.#defaults.allow_pickle;
      this.onPickleChange?.(this.allowPickle);
      this.#resultCode = null;
      if (!this.#running) this.#status.replaceChildren();
    }
    this.#update();
  }

  /** Ticks "Unlock pickles for this load" and opens the form (the lock box's button). */
  unlockPickles(): void {
    this.#unlock.checked = true;
    this.setOpen(true);
    this.#formChanged();
    this.onPickleChange?.(true);
  }

  /** Unticks "Unlock pickles for this load". */
  lockPickles(): void {
    this.#unlock.checked = false;
    this.#formChanged();
    this.onPickleChange?.(false);
  }

  async refreshDevices(): Promise<void> {
    this.#devicesAbort?.abort();
    const abort = new AbortController();
    this.#devicesAbort = abort;
    this.#update();
    try {
      const { devices } = await this.#data.devices({ signal: abort.signal });
      if (abort.signal.aborted) return;
      this.#devices = devices;
      const current = this.#device.value;
      this.#device.replaceChildren(
        ...devices.map((d) => {
          const free = d.free_bytes === null ? "" : ` · ${humanBytes(d.free_bytes)} free`;
          return option(`${d.name}${free}`, d.name);
        }),
      );
      if (!devices.some((d) => d.name === current)) {
        this.#device.append(option(current, current));
      }
      this.#device.value = current;
      this.#update();
    } catch (error) {
      if (!isCancelled(error)) this.#memory.textContent = `Devices: ${errorText(error)}`;
    } finally {
      if (this.#devicesAbort === abort) this.#devicesAbort = null;
    }
  }

  /**
   * Sends `load` for the current node; resolves once it has ended, however. `replace`:
   * the user confirmed that the variable may be rebound.
   */
  async load(replace = false): Promise<LoadResult | null> {
    const node = this.#node;
    if (!node || this.#running || this.#variableError() !== null || loadRefusal(node)) {
      return null;
    }
    const args = this.#args();
    const params: LoadParams = {
      path: node.path,
      device: args.device,
      mode: args.mode,
      allow_pickle: args.allowPickle,
      variable: args.variable,
      replace,
    };
    const label = node.path.join("/") || "the whole checkpoint";
    const abort = new AbortController();
    const running = { abort, label, shown: false };
    this.#running = running;
    this.#confirm = null;
    const progress = el("progress", "tdview-progress");
    const progressText = el("span", "tdview-progress-label", `Loading ${label}…`);
    const row = el("div", "tdview-progress-row");
    row.append(progress, progressText);
    const reveal = () => {
      running.shown = true;
      this.#status.replaceChildren(row);
      this.#update();
    };
    this.#status.replaceChildren();
    const timer = setTimeout(reveal, loadTiming.progressDelayMs);
    if (loadTiming.progressDelayMs <= 0) reveal();
    this.#update();
    const onProgress = (p: ProgressInfo) => {
      progress.max = Math.max(p.total, 1);
      progress.value = p.done;
      const leaves = p.total === 1 ? "leaf" : "leaves";
      const what = p.total > 0 ? ` ${formatCount(p.done)} / ${formatCount(p.total)} ${leaves}` : "";
      progressText.textContent = `Loading ${label}…${what}${p.label ? ` · ${p.label}` : ""}`;
    };
    try {
      const result = await this.#data.load(params, onProgress, { signal: abort.signal });
      this.#showResult(result);
      if (this.isOpen) void this.refreshDevices();
      return result;
    } catch (error) {
      if (error instanceof ProtocolError && error.type === VARIABLE_BOUND && args.variable) {
        this.#askReplace(error.message, args.variable);
      } else {
        this.#showError(error, label);
      }
      return null;
    } finally {
      clearTimeout(timer);
      this.#running = null;
      this.#update();
    }
  }

  /** Cancels the running load (the kernel binds nothing). */
  cancel(): void {
    this.#running?.abort.abort();
  }

  dispose(): void {
    this.#devicesAbort?.abort();
    this.#running?.abort.abort();
    this.#copy.dispose();
    this.#ranks.dispose();
  }

  #args() {
    const variable = this.#variable.value.trim();
    // inside a member of a collection, the line loads from the member's own path
    const node = this.#node;
    const target = loadTarget(this.#source, node?.path ?? [], node?.member);
    return {
      ...target,
      device: this.#device.value || this.#defaults.device,
      mode: MODES.find((m) => m.value === this.#mode.value)?.mode ?? null,
      allowPickle: this.#unlock.checked,
      variable: variable === "" || this.#defaults.can_bind === false ? null : variable,
      leaf: this.#node?.kind === "leaf",
      foreign: this.#defaults.foreign === true && node?.member === undefined,
    };
  }

  #variableError(): string | null {
    const name = this.#variable.value.trim();
    if (this.#defaults.can_bind === false) return null;
    return name === "" ? null : identifierProblem(name);
  }

  readonly #formChanged = (): void => {
    this.#resultCode = null;
    this.#update();
  };

  #update(): void {
    const node = this.#node;
    const problem = this.#variableError();
    this.#variable.setAttribute("aria-invalid", String(problem !== null));
    this.#variableProblem.textContent = problem ?? "";
    const refusal = node && loadRefusal(node);
    // Pickles can only be met in a pickled node or under one with children.
    const mayPickle = node !== null && (node.pickled || node.has_children || node.pickle !== null);
    this.#unlockField.hidden = !!refusal || (!mayPickle && !this.#unlock.checked);
    this.#unlockField.classList.toggle("tdview-unlocked", this.#unlock.checked);
    const bytes = node ? (node.rollup?.bytes ?? node.bytes) : null;
    const device = this.#devices.find((d) => d.name === this.#device.value) ?? {
      name: this.#device.value,
      free_bytes: null,
      total_bytes: null,
    };
    // a collection whose subtree totals the details have not brought yet
    const pending = node !== null && bytes === null && node.has_children && node.rollup === null;
    const asking = this.#devicesAbort !== null && this.#devices.length === 0;
    const fit = memoryFit(bytes, device, this.#args().mode, pending, asking);
    this.#memory.replaceChildren(el("span", "", fit.text));
    if (fit.warning) this.#memory.append(alertBox(`⚠ ${fit.warning}`, "tdview-warning"));
    this.#refusal.textContent = refusal ?? "";
    this.#refusal.hidden = !refusal;
    for (const part of this.#loadable) part.hidden = !!refusal;
    this.#code.textContent = node && !refusal ? this.code : "";
    const target = this.#args();
    this.#ranks.setNode(refusal ? null : node, target.source, target.path);
    this.#copy.disabled = node === null || !!refusal;
    const running = this.#running !== null;
    this.#loadButton.disabled = node === null || running || problem !== null || !!refusal;
    this.#loadButton.title = running ? `Loading ${this.#running?.label}…` : (refusal ?? "");
    this.#cancelButton.hidden = !this.#running?.shown;
  }

  /** Asks whether to replace `variable`, which the kernel says is bound (`message`:
   * what it holds); the question goes when the name changes. */
  #askReplace(message: string, variable: string): void {
    const box = el("div", "tdview-warning tdview-bound");
    box.setAttribute("role", "alert");
    const said = el("span", "tdview-bound-message");
    said.append(...codeSpans(`⚠ ${message}.`));
    box.append(said);
    const replace = button("", "tdview-replace-button", () => void this.load(true));
    replace.append("Replace ", el("code", "", variable));
    const rename = button("Choose another name", "tdview-rename-button", () => {
      this.#dropConfirm();
      this.#variable.focus();
      this.#variable.select();
    });
    const actions = el("div", "tdview-bound-actions");
    actions.append(replace, rename);
    box.append(actions);
    this.#confirm = box;
    this.#status.replaceChildren(box);
    replace.focus();
  }

  #dropConfirm(): void {
    if (this.#confirm === null) return;
    this.#confirm = null;
    if (!this.#running) this.#status.replaceChildren();
  }

  #showResult(result: LoadResult): void {
    // the kernel's line stands for the form only while the form shows the loaded node
    // (the user may have selected another one meanwhile: Copy code must copy its line)
    if (JSON.stringify(this.#node?.path) === JSON.stringify(result.path)) {
      this.#resultCode = result.code;
    }
    const where = result.path.join("/") || "the whole checkpoint";
    const head = el("p", "tdview-load-done");
    head.append(`Loaded ${where} `);
    if (result.variable) {
      head.append("into ", el("code", "tdview-variable-name", result.variable));
    } else {
      head.append("(kept as the view's ", el("code", "", ".value"), ")");
    }
    const summary = el("pre", "tdview-load-summary", result.summary);
    this.#status.replaceChildren(head, summary);
  }

  #showError(error: unknown, label: string): void {
    if (isCancelled(error)) {
      this.#status.replaceChildren(
        el(
          "p",
          "tdview-note tdview-load-cancelled",
          `Load of ${label} cancelled; nothing was bound.`,
        ),
      );
      return;
    }
    const box = alertBox(errorText(error));
    if (error instanceof ProtocolError && /pickle/i.test(error.type + error.message)) {
      box.append(el("div", "tdview-hint", PICKLE_HINT));
    }
    this.#status.replaceChildren(box);
  }
}
