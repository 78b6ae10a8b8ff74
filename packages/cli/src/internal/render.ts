/**
 * Text for people: aligned tables, times relative to the store's clock, values printable and bounded.
 *
 * @internal
 */

/** At most this many characters of any value a person sees in one cell or message. */
const MAX_TEXT = 300

/**
 * A value made safe to print: control characters escaped (`\n`, `\x1b`, …) and cut at `max`
 * characters, with the length of the whole said.
 *
 * @internal
 */
export const printable = (value: string, max = MAX_TEXT): string => {
  // eslint-disable-next-line no-control-regex
  const escaped = value.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => {
    switch (c) {
      case "\n":
        return "\\n"
      case "\r":
        return "\\r"
      case "\t":
        return "\\t"
      default:
        return `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`
    }
  })
  return escaped.length <= max ? escaped : `${escaped.slice(0, max)}… (${value.length} characters)`
}

/**
 * Columns aligned under their headers, two spaces apart.
 *
 * @internal
 */
export const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const cells = rows.map((row) => row.map((cell) => printable(cell)))
  const widths = headers.map((header, i) => Math.max(header.length, ...cells.map((row) => row[i]?.length ?? 0)))
  const line = (row: ReadonlyArray<string>) =>
    row.map((cell, i) => i === row.length - 1 ? cell : cell.padEnd(widths[i]!)).join("  ").trimEnd()
  return [line(headers), line(widths.map((width) => "-".repeat(width))), ...cells.map(line)].join("\n")
}

/**
 * Label and value pairs, one per line, the values aligned.
 *
 * @internal
 */
export const fields = (pairs: ReadonlyArray<readonly [string, string]>): string => {
  const width = Math.max(...pairs.map(([label]) => label.length))
  return pairs.map(([label, value]) => `${label.padEnd(width)}  ${printable(value)}`).join("\n")
}

const units: ReadonlyArray<readonly [number, string]> = [[86_400_000, "d"], [3_600_000, "h"], [60_000, "m"], [
  1_000,
  "s"
]]

/**
 * A span of milliseconds in its two largest units: `1h 5m`, `42s`, `250ms`.
 *
 * @internal
 */
export const span = (millis: number): string => {
  const abs = Math.abs(millis)
  if (abs < 1000) return `${Math.round(abs)}ms`
  const parts: Array<string> = []
  let rest = abs
  for (const [size, unit] of units) {
    if (rest >= size && parts.length < 2) {
      parts.push(`${Math.floor(rest / size)}${unit}`)
      rest %= size
    } else if (parts.length > 0) break
  }
  return parts.join(" ")
}

/**
 * An instant of the store's clock, as an ISO time and relative to `now`: `2026-12-01T10:00:00.000Z (in 20s)`.
 *
 * @internal
 */
export const instant = (at: number, now: number): string => {
  const iso = Math.abs(at) <= 8.64e15 ? new Date(at).toISOString() : String(at)
  return `${iso} (${at >= now ? `in ${span(at - now)}` : `${span(now - at)} ago`})`
}
