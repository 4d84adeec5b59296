/** A start-up problem an operator must fix; the message names the setting. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}
