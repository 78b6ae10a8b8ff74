/** @internal */
import { SEPARATOR } from "@effect-idempotency/core/IdempotencyKey"

/** @internal */
export const keyOf = (prefix: string, id: string): string => `${prefix}{${id}}`

const globEscape = (text: string): string => text.replace(/[*?[\]\\]/g, "\\$&")

/** @internal */
export const keyPattern = (prefix: string, operation?: string): string =>
  operation === undefined
    ? `${globEscape(prefix)}{*}`
    : `${globEscape(prefix)}{${globEscape(encodeURIComponent(operation))}${SEPARATOR}*}`
