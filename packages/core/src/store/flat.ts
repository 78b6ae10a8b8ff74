import type { StoredOutcome } from "../IdempotencyRecord.js"

/**
 * A string as one flat sequence of characters.
 *
 * V8 keeps a string built by concatenation (`a + b`, a template, `JSON.stringify`'s output, Node's
 * `randomUUID`) as a tree of its pieces until something reads its characters. A record that keeps
 * such a string keeps the tree: a token from `randomUUID` takes about 490 bytes that way instead of
 * 64. Reading one character flattens the string in place (as a comparison would, later), and the
 * next collection drops the tree. On engines that keep no such trees the read is simply a read.
 *
 * @internal
 */
export const flat = (text: string): string => {
  // kept, so that no compiler drops the read as unused
  _read ^= text.charCodeAt(0) | 0
  return text
}

let _read = 0

/** `outcome`, with the text it keeps flat (see `flat`). */
export const flatOutcome = <O extends StoredOutcome | undefined>(outcome: O): O => {
  if (outcome !== undefined) {
    if (outcome._tag === "Success") flat(outcome.value)
    else if (outcome._tag === "Failure") flat(outcome.error)
    else if (outcome._tag === "Omitted") flat(outcome.reason)
  }
  return outcome
}
