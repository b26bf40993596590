/**
 * Reading submitted forms: a field is one string, or it is absent (repeated fields count as
 * absent); a checkbox is ticked when its field is there at all, once or more.
 */
export function formField(body: unknown, name: string): string | null {
  if (typeof body !== 'object' || body === null || !Object.hasOwn(body, name)) return null;
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : null;
}

export function formTicked(body: unknown, name: string): boolean {
  return typeof body === 'object' && body !== null && Object.hasOwn(body, name);
}
