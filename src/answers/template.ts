/** Messages with `{name}` placeholders: the refusal table's and the admin API's. */

/** A message template with each `{name}` filled from `params` (a name without a value stays as it is). */
export function formatMessage(template: string, params: Readonly<Record<string, unknown>> = {}): string {
  return template.replace(/\{(\w+)\}/g, (m, k: string) => (k in params ? String(params[k]) : m));
}
