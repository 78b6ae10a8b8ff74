import * as Duration from "effect/Duration"

/** @internal */
export const toMillis = (input: Duration.DurationInput): number =>
  Math.max(0, Math.round(Duration.toMillis(Duration.decode(input))))

/**
 * `850ms`, `12.5s`, `1m 8s`, `6h 0m 3s`.
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

/** @internal */
export const offset = (ms: number): string => `+${millis(ms)}`

/**
 * JSON with sorted keys: structurally equal values have one text.
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

/** @internal */
export const short = (value: unknown, max = 80): string => {
  const text = canonical(value)
  return text.length > max ? `${text.slice(0, max - 3)}...` : text
}

/** @internal */
export const key = (value: string | undefined): string =>
  value === undefined ? "no key" : value.length > 10 ? `key ${value.slice(0, 8)}...` : `key ${value}`

const kind = (value: unknown): string => {
  if (value === null || value === undefined) return String(value)
  if (typeof value !== "object") return `a ${typeof value}`
  if (Array.isArray(value)) return "an array"
  if (value instanceof Date) return "a Date"
  const prototype = Object.getPrototypeOf(value)
  return prototype === Object.prototype || prototype === null
    ? "a plain object"
    : `an instance of ${prototype.constructor?.name ?? "an anonymous class"}`
}

const scalar = (value: unknown): string =>
  Object.is(value, -0) ? "-0" : typeof value === "bigint" ? `${value}n` : JSON.stringify(value) ?? String(value)

/**
 * Where two values differ, also when they print the same (README.md#what-fails-it).
 *
 * @internal
 */
export const difference = (a: unknown, b: unknown): string => {
  const go = (x: unknown, y: unknown, path: string): string | undefined => {
    if (Object.is(x, y)) return undefined
    const at = path === "" ? "at the top" : `at ${path}`
    if (kind(x) !== kind(y)) return `${at}: ${kind(x)} vs ${kind(y)}`
    if (typeof x !== "object" || x === null) return `${at}: ${scalar(x)} vs ${scalar(y)}`
    if (x instanceof Date) {
      return x.getTime() === (y as Date).getTime()
        ? undefined
        : `${at}: ${x.toISOString()} vs ${(y as Date).toISOString()}`
    }
    const left = x as Record<string, unknown>
    const right = y as Record<string, unknown>
    for (const key of new Set([...Object.keys(left), ...Object.keys(right)])) {
      const member = Array.isArray(x) ? `${path}[${key}]` : `${path}.${key}`
      if (!Object.hasOwn(right, key)) return `at ${member}: ${kind(left[key])} vs absent`
      if (!Object.hasOwn(left, key)) return `at ${member}: absent vs ${kind(right[key])}`
      const found = go(left[key], right[key], member)
      if (found !== undefined) return found
    }
    return undefined
  }
  return go(a, b, "") ?? "in a way their members do not show"
}
