/**
 * A tiny HTML template tag: every interpolated value is escaped unless it is itself
 * the result of `html`, so markup can only come from the templates' literal text.
 *
 *   html`<p>${name}</p>`            // name is text, whatever it contains
 *   html`<ul>${items.map((i) => html`<li>${i}</li>`)}</ul>`
 */
const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Markup that is already safe: produced by `html` from literal text and escaped values. */
export class SafeHtml {
  readonly value: string;

  constructor(value: string) {
    this.value = value;
  }
  toString(): string {
    return this.value;
  }
}

/** What a template may interpolate; nothing, null and false render as nothing. */
export type Interpolation = SafeHtml | string | number | null | undefined | false | readonly Interpolation[];

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

function render(value: Interpolation): string {
  if (value instanceof SafeHtml) return value.value;
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return (value as readonly Interpolation[]).map(render).join('');
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: Interpolation[]): SafeHtml {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new SafeHtml(out);
}
