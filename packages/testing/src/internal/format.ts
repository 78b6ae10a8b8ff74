/**
 * Formats a duration in milliseconds for a timeline: `850ms`, `12.5s`, `1m 8s`, `6h 0m 3s`.
 *
 * @internal
 */
export const millis = (ms: number): string => {
  const sign = ms < 0 ? "-" : ""
  const abs = Math.abs(Math.round(ms))
  if (abs < 1_000) return `${sign}${abs}ms`
  if (abs < 60_000) {
    const seconds = abs / 1_000
    return `${sign}${Number.isInteger(seconds) ? seconds : seconds.toFixed(3).replace(/0+$/, "")}s`
  }
  const hours = Math.floor(abs / 3_600_000)
  const minutes = Math.floor((abs % 3_600_000) / 60_000)
  const rest = (abs % 60_000) / 1_000
  const seconds = Number.isInteger(rest) ? `${rest}s` : `${rest.toFixed(3).replace(/0+$/, "")}s`
  return hours > 0 ? `${sign}${hours}h ${minutes}m ${seconds}` : `${sign}${minutes}m ${seconds}`
}

/**
 * A time relative to the start of a case: `+1m 8s`.
 *
 * @internal
 */
export const offset = (ms: number): string => `+${millis(ms)}`

/**
 * JSON with object keys sorted, so that two structurally equal values have one text. Values JSON
 * cannot represent are written with `String`.
 *
 * @internal
 */
export const canonical = (value: unknown): string => {
  const seen = new Set<unknown>()
  const go = (u: unknown): unknown => {
    if (u === null || typeof u !== "object") {
      return typeof u === "bigint" || typeof u === "symbol" || typeof u === "function" ? String(u) : u
    }
    if (seen.has(u)) return "[circular]"
    seen.add(u)
    const out = Array.isArray(u)
      ? u.map(go)
      : u instanceof Date
      ? u.toISOString()
      : Object.fromEntries(Object.keys(u).sort().map((key) => [key, go((u as Record<string, unknown>)[key])]))
    seen.delete(u)
    return out
  }
  return JSON.stringify(go(value)) ?? "undefined"
}

/**
 * A short, single-line rendering of a value for a timeline.
 *
 * @internal
 */
export const short = (value: unknown, max = 80): string => {
  const text = canonical(value)
  return text.length > max ? `${text.slice(0, max - 3)}...` : text
}

/**
 * The first characters of a key, for a timeline.
 *
 * @internal
 */
export const key = (value: string | undefined): string =>
  value === undefined ? "no key" : value.length > 10 ? `key ${value.slice(0, 8)}...` : `key ${value}`
