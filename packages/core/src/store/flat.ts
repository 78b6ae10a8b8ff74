import type { StoredOutcome } from "../IdempotencyRecord.js"

/**
 * Flattens a string built by concatenation, which V8 keeps as a tree of its pieces (a
 * `randomUUID` token: about 490 bytes instead of 64) until something reads its characters.
 *
 * @internal
 */
export const flat = (text: string): string => {
  // kept, so that no compiler drops the read as unused
  _read ^= text.charCodeAt(0) | 0
  return text
}

let _read = 0

export const flatOutcome = <O extends StoredOutcome | undefined>(outcome: O): O => {
  if (outcome !== undefined) {
    if (outcome._tag === "Success") flat(outcome.value)
    else if (outcome._tag === "Failure") flat(outcome.error)
    else if (outcome._tag === "Omitted") flat(outcome.reason)
  }
  return outcome
}
