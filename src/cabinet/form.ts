/** Reading submitted forms: a field is one string, or it is absent (repeated fields count as absent). */
export function formField(body: unknown, name: string): string | null {
  if (typeof body !== 'object' || body === null || !Object.hasOwn(body, name)) return null;
  const value = (body as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : null;
}
