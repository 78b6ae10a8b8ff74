import type { AttributeValue } from "@aws-sdk/client-dynamodb"

// Compiled once per store; a request carries exactly the placeholders it uses (DynamoDB rejects unused ones).

type Part =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Name"; readonly name: string }
  | { readonly _tag: "Value"; readonly value: AttributeValue }
  | { readonly _tag: "Param"; readonly param: string }

type Binding = "Or" | "And" | "Operand"

/** @internal */
export interface Expr<out P extends string = never> {
  readonly parts: ReadonlyArray<Part>
  readonly binding: Binding
  readonly "~params"?: P
}

type ParamsOf<E> = E extends Expr<infer P> ? P : never

const text = (value: string): Expr => ({ parts: [{ _tag: "Text", text: value }], binding: "Operand" })

/** @internal */
export const name = (attribute: string): Expr => ({ parts: [{ _tag: "Name", name: attribute }], binding: "Operand" })

/** @internal */
export const value = (attributeValue: AttributeValue): Expr => ({
  parts: [{ _tag: "Value", value: attributeValue }],
  binding: "Operand"
})

/** @internal */
export const str = (s: string): Expr => value({ S: s })

/** @internal */
export const num = (n: number): Expr => value({ N: String(n) })

/** @internal */
export const param = <P extends string>(param: P): Expr<P> => ({
  parts: [{ _tag: "Param", param }],
  binding: "Operand"
})

const group = (e: Expr<string>): Expr => ({
  parts: [{ _tag: "Text", text: "(" }, ...e.parts, { _tag: "Text", text: ")" }],
  binding: "Operand"
})

/**
 * A logical chain is interpolated in parentheses: the text around it may bind tighter.
 *
 * @internal
 */
export const expr = <const Args extends ReadonlyArray<Expr<string>>>(
  strings: TemplateStringsArray,
  ...args: Args
): Expr<ParamsOf<Args[number]>> => {
  const parts: Array<Part> = []
  strings.forEach((s, i) => {
    if (s.length > 0) parts.push({ _tag: "Text", text: s })
    const arg = args[i]
    if (arg !== undefined) parts.push(...(arg.binding === "Operand" ? arg : group(arg)).parts)
  })
  return { parts, binding: "Operand" }
}

const join = (separator: string, exprs: ReadonlyArray<Expr<string>>, binding: Binding): Expr => ({
  parts: exprs.flatMap((e, i) => i === 0 ? e.parts : [...text(separator).parts, ...e.parts]),
  binding
})

/**
 * Parentheses only around an `or` operand: see README.md#how-each-method-maps-to-dynamodb.
 *
 * @internal
 */
export const and = <const Args extends ReadonlyArray<Expr<string>>>(...exprs: Args): Expr<ParamsOf<Args[number]>> =>
  join(" AND ", exprs.map((e) => e.binding === "Or" ? group(e) : e), "And")

/** @internal */
export const or = <const Args extends ReadonlyArray<Expr<string>>>(...exprs: Args): Expr<ParamsOf<Args[number]>> =>
  join(" OR ", exprs, "Or")

/** @internal */
export const update = <const Set extends ReadonlyArray<readonly [attribute: string, Expr<string>]>>(options: {
  readonly set: Set
  readonly remove?: ReadonlyArray<string> | undefined
}): Expr<ParamsOf<Set[number][1]>> => {
  const assignments = options.set.map(([attribute, e]) => expr`${name(attribute)} = ${e}`)
  const set = expr`SET ${join(", ", assignments, "Operand")}`
  const remove = options.remove ?? []
  return remove.length === 0 ? set : expr`${set} REMOVE ${join(", ", remove.map(name), "Operand")}`
}

/** @internal */
export const projection = (attributes: ReadonlyArray<string>): Expr => join(", ", attributes.map(name), "Operand")

/** @internal */
export interface Fields {
  readonly ConditionExpression?: string
  readonly UpdateExpression?: string
  readonly FilterExpression?: string
  readonly ProjectionExpression?: string
  readonly ExpressionAttributeNames?: Record<string, string>
  readonly ExpressionAttributeValues?: Record<string, AttributeValue>
}

/** @internal */
export type Compiled<P extends string> = (params: { readonly [K in P]: AttributeValue }) => Fields

/** @internal */
export const compile = <
  C extends string = never,
  U extends string = never,
  F extends string = never,
  R extends string = never
>(expressions: {
  readonly condition?: Expr<C> | undefined
  readonly update?: Expr<U> | undefined
  readonly filter?: Expr<F> | undefined
  readonly projection?: Expr<R> | undefined
}): Compiled<C | U | F | R> => {
  const all = [expressions.condition, expressions.update, expressions.filter, expressions.projection]
  const params = new Map<string, string>()
  for (const e of all) {
    for (const part of e?.parts ?? []) {
      if (part._tag === "Param") params.set(part.param, `:${part.param}`)
    }
  }
  const used = new Set(params.values())
  const names = new Map<string, string>()
  const values = new Map<string, readonly [string, AttributeValue]>()
  let nextValue = 0
  const render = (e: Expr<string>): string =>
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
          while (used.has(`:v${nextValue}`)) nextValue++
          const placeholder = `:v${nextValue++}`
          values.set(key, [placeholder, part.value])
          return placeholder
        }
        case "Param":
          return `:${part.param}`
      }
    }).join("")
  const fields: {
    -readonly [K in keyof Fields]: Fields[K]
  } = {}
  if (expressions.condition !== undefined) fields.ConditionExpression = render(expressions.condition)
  if (expressions.update !== undefined) fields.UpdateExpression = render(expressions.update)
  if (expressions.filter !== undefined) fields.FilterExpression = render(expressions.filter)
  if (expressions.projection !== undefined) fields.ProjectionExpression = render(expressions.projection)
  if (names.size > 0) {
    fields.ExpressionAttributeNames = Object.fromEntries(Array.from(names, ([attribute, placeholder]) => [
      placeholder,
      attribute
    ]))
  }
  const constants = Array.from(values.values())
  const placeholders = Array.from(params)
  if (constants.length === 0 && placeholders.length === 0) return () => fields
  return (given) => {
    const attributeValues: Record<string, AttributeValue> = {}
    for (const [placeholder, attributeValue] of constants) attributeValues[placeholder] = attributeValue
    for (const [param, placeholder] of placeholders) {
      attributeValues[placeholder] = (given as Record<string, AttributeValue>)[param]!
    }
    return { ...fields, ExpressionAttributeValues: attributeValues }
  }
}
