import type { Statement } from "../SqlStoreKit.js"

/** @internal */
export interface Fragment {
  readonly text: string
  readonly slots: ReadonlyArray<number>
}

/** @internal */
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

/** @internal */
export const statement = (
  piece: Fragment,
  options?: { readonly affected?: string; readonly counted?: string }
): Statement => ({ text: piece.text, slots: piece.slots, ...options })
