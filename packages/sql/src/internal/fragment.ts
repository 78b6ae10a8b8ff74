import type { Statement } from "../SqlStoreKit.js"

/**
 * A piece of SQL with `?` placeholders, and the index of the argument each one reads, in order.
 *
 * @internal
 */
export interface Fragment {
  readonly text: string
  readonly slots: ReadonlyArray<number>
}

/**
 * A placeholder for the argument at `index`.
 *
 * @internal
 */
export const arg = (index: number): Fragment => ({ text: "?", slots: [index] })

/**
 * SQL written as a template: strings are spliced as they are, fragments with their placeholders.
 *
 * @internal
 */
export const fragment = (strings: TemplateStringsArray, ...parts: ReadonlyArray<Fragment | string>): Fragment => {
  let text = strings[0]!
  const slots: Array<number> = []
  parts.forEach((part, i) => {
    if (typeof part === "string") {
      text += part
    } else {
      text += part.text
      slots.push(...part.slots)
    }
    text += strings[i + 1]!
  })
  return { text, slots }
}

/**
 * A `Statement` of `SqlStoreKit` from a fragment.
 *
 * @internal
 */
export const statement = (
  piece: Fragment,
  options?: { readonly affected?: string; readonly counted?: string }
): Statement => ({ text: piece.text, slots: piece.slots, ...options })
