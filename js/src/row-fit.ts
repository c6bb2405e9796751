/**
 * A row's key and its annotations fitted to the row's width: the key wins.
 *
 * Each annotation has forms from whole to shortest ("" hides it); `steps` says which
 * annotation gives way next, one form at a time. The first layout that holds the whole
 * key is taken; when even the barest one does not, the key is cut in the middle
 * (`middleCut`) to the width the remaining annotations leave.
 */

import { type Measure, middleCut } from "./middle-cut";

export interface FitPart {
  /** Forms from whole to shortest; "" is hidden (a part with no text has no forms). */
  forms: readonly string[];
  measure: Measure;
  /** Extra px around the text (padding, border). */
  pad?: number;
  /** At most this many px are kept for it (a value that cuts itself with CSS). */
  maxWidth?: number;
}

export interface FitResult {
  key: string;
  /** The form shown of each part ("": hidden), in the order of `parts`. */
  texts: string[];
}

/**
 * @param width px for the key and the parts together
 * @param gap px between two shown items
 * @param steps indices into `parts`: the order in which they give way, one form a step
 */
export function fitRow(
  key: string,
  keyMeasure: Measure,
  parts: readonly FitPart[],
  steps: readonly number[],
  width: number,
  gap: number,
): FitResult {
  const form = parts.map(() => 0);
  const text = (i: number) => parts[i]?.forms[form[i] ?? 0] ?? "";
  const partsWidth = () =>
    parts.reduce((sum, part, i) => {
      const t = text(i);
      if (!t) return sum;
      const w = part.measure(t) + (part.pad ?? 0);
      return sum + Math.min(w, part.maxWidth ?? w) + gap;
    }, 0);
  const keyWidth = keyMeasure(key);
  for (const step of [-1, ...steps]) {
    if (step >= 0) form[step] = Math.min((form[step] ?? 0) + 1, parts[step]?.forms.length ?? 0);
    if (keyWidth + partsWidth() <= width) return { key, texts: parts.map((_, i) => text(i)) };
  }
  return {
    key: middleCut(key, Math.max(0, width - partsWidth()), keyMeasure),
    texts: parts.map((_, i) => text(i)),
  };
}
