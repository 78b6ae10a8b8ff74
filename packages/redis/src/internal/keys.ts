/**
 * The keys of records: `<prefix>{<record id>}`, and the `SCAN MATCH` patterns that find them.
 *
 * @internal
 */
import { SEPARATOR } from "@effect-idempotency/core/IdempotencyKey"

/**
 * `prefix{id}`: the id is the key's hash tag, so a record's slot depends on its id alone.
 *
 * @internal
 */
export const keyOf = (prefix: string, id: string): string => `${prefix}{${id}}`

/** `text` matched literally by a `SCAN MATCH` pattern. */
const globEscape = (text: string): string => text.replace(/[*?[\]\\]/g, "\\$&")

/**
 * A `SCAN MATCH` pattern of every record key under `prefix`, or of the records of one operation
 * (its ids start with the percent-encoded operation and `#`, see `makeRecordId`).
 *
 * @internal
 */
export const keyPattern = (prefix: string, operation?: string): string =>
  operation === undefined
    ? `${globEscape(prefix)}{*}`
    : `${globEscape(prefix)}{${globEscape(encodeURIComponent(operation))}${SEPARATOR}*}`
