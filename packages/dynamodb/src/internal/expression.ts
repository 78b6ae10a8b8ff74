import type { AttributeValue } from "@aws-sdk/client-dynamodb"

// A DynamoDB expression as data: literal text, attribute names and values. Names and values are
// given placeholders only when the request is compiled, so every request carries exactly the
// placeholders its expressions use (DynamoDB rejects unused ones), and no expression is written
// twice: the store composes its conditions from a few fragments.

type Part =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Name"; readonly name: string }
  | { readonly _tag: "Value"; readonly value: AttributeValue }

/** @internal */
export interface Expr {
  readonly parts: ReadonlyArray<Part>
}

const text = (value: string): Expr => ({ parts: [{ _tag: "Text", text: value }] })

/** @internal */
export const name = (attribute: string): Expr => ({ parts: [{ _tag: "Name", name: attribute }] })

/** @internal */
export const value = (attributeValue: AttributeValue): Expr => ({ parts: [{ _tag: "Value", value: attributeValue }] })

/** @internal */
export const str = (s: string): Expr => value({ S: s })

/** @internal */
export const num = (n: number): Expr => value({ N: String(n) })

/**
 * Interpolates names, values and sub-expressions into literal text.
 *
 * @internal
 */
export const expr = (strings: TemplateStringsArray, ...args: ReadonlyArray<Expr>): Expr => {
  const parts: Array<Part> = []
  strings.forEach((s, i) => {
    if (s.length > 0) parts.push({ _tag: "Text", text: s })
    const arg = args[i]
    if (arg !== undefined) parts.push(...arg.parts)
  })
  return { parts }
}

const join = (separator: string, exprs: ReadonlyArray<Expr>): Expr => ({
  parts: exprs.flatMap((e, i) => i === 0 ? e.parts : [...text(separator).parts, ...e.parts])
})

const group = (e: Expr): Expr => expr`(${e})`

/** @internal */
export const and = (...exprs: ReadonlyArray<Expr>): Expr => join(" AND ", exprs.map(group))

/** @internal */
export const or = (...exprs: ReadonlyArray<Expr>): Expr => join(" OR ", exprs.map(group))

/**
 * `SET a = x, b = y REMOVE c, d`
 *
 * @internal
 */
export const update = (options: {
  readonly set: ReadonlyArray<readonly [attribute: string, Expr]>
  readonly remove?: ReadonlyArray<string> | undefined
}): Expr => {
  const set = expr`SET ${join(", ", options.set.map(([attribute, e]) => expr`${name(attribute)} = ${e}`))}`
  const remove = options.remove ?? []
  return remove.length === 0 ? set : expr`${set} REMOVE ${join(", ", remove.map(name))}`
}

/** @internal */
export interface Compiled {
  readonly ConditionExpression?: string
  readonly UpdateExpression?: string
  readonly FilterExpression?: string
  readonly ProjectionExpression?: string
  readonly ExpressionAttributeNames?: Record<string, string>
  readonly ExpressionAttributeValues?: Record<string, AttributeValue>
}

/**
 * Compiles expressions into request fields: names become `#n0, #n1, …`, values `:v0, :v1, …`;
 * an attribute used twice, or an equal value used twice, shares one placeholder.
 *
 * @internal
 */
export const compile = (expressions: {
  readonly condition?: Expr | undefined
  readonly update?: Expr | undefined
  readonly filter?: Expr | undefined
  readonly projection?: Expr | undefined
}): Compiled => {
  const names = new Map<string, string>()
  const values = new Map<string, readonly [string, AttributeValue]>()
  const render = (e: Expr): string =>
    e.parts.map((part) => {
      switch (part._tag) {
        case "Text":
          return part.text
        case "Name": {
          const existing = names.get(part.name)
          if (existing !== undefined) return existing
          const placeholder = `#n${names.size}`
          names.set(part.name, placeholder)
          return placeholder
        }
        case "Value": {
          const key = JSON.stringify(part.value)
          const existing = values.get(key)
          if (existing !== undefined) return existing[0]
          const placeholder = `:v${values.size}`
          values.set(key, [placeholder, part.value])
          return placeholder
        }
      }
    }).join("")
  const out: {
    -readonly [K in keyof Compiled]: Compiled[K]
  } = {}
  if (expressions.condition !== undefined) out.ConditionExpression = render(expressions.condition)
  if (expressions.update !== undefined) out.UpdateExpression = render(expressions.update)
  if (expressions.filter !== undefined) out.FilterExpression = render(expressions.filter)
  if (expressions.projection !== undefined) out.ProjectionExpression = render(expressions.projection)
  if (names.size > 0) {
    out.ExpressionAttributeNames = Object.fromEntries(Array.from(names, ([attribute, placeholder]) => [
      placeholder,
      attribute
    ]))
  }
  if (values.size > 0) out.ExpressionAttributeValues = Object.fromEntries(values.values())
  return out
}

/**
 * A projection of attribute names.
 *
 * @internal
 */
export const projection = (attributes: ReadonlyArray<string>): Expr => join(", ", attributes.map(name))
