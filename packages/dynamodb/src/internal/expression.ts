import type { AttributeValue } from "@aws-sdk/client-dynamodb"

// A DynamoDB expression as data: literal text, attribute names, constant values and parameters
// (values given per request). A store compiles its expressions once, when it is made: the text,
// the attribute-name map and the constant values are then fixed, and a request only fills in its
// parameters. Every compiled request carries exactly the placeholders its expressions use
// (DynamoDB rejects unused ones), and no expression is written twice: the store composes its
// conditions from a few fragments.

type Part =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Name"; readonly name: string }
  | { readonly _tag: "Value"; readonly value: AttributeValue }
  | { readonly _tag: "Param"; readonly param: string }

/**
 * How an expression binds: `Or` and `And` are logical chains, `Operand` is anything that needs no
 * parentheses in any position (a comparison, a function call, a name, a value).
 */
type Binding = "Or" | "And" | "Operand"

/**
 * An expression whose parameters are `P`.
 *
 * @internal
 */
export interface Expr<out P extends string = never> {
  readonly parts: ReadonlyArray<Part>
  readonly binding: Binding
  /** Type-level only: the names of the parameters the expression uses. */
  readonly "~params"?: P
}

type ParamsOf<E> = E extends Expr<infer P> ? P : never

const text = (value: string): Expr => ({ parts: [{ _tag: "Text", text: value }], binding: "Operand" })

/** @internal */
export const name = (attribute: string): Expr => ({ parts: [{ _tag: "Name", name: attribute }], binding: "Operand" })

/**
 * A constant value: the same in every request.
 *
 * @internal
 */
export const value = (attributeValue: AttributeValue): Expr => ({
  parts: [{ _tag: "Value", value: attributeValue }],
  binding: "Operand"
})

/** @internal */
export const str = (s: string): Expr => value({ S: s })

/** @internal */
export const num = (n: number): Expr => value({ N: String(n) })

/**
 * A value given per request, under the placeholder `:${param}` (a word: letters and digits).
 *
 * @internal
 */
export const param = <P extends string>(param: P): Expr<P> => ({
  parts: [{ _tag: "Param", param }],
  binding: "Operand"
})

// The builders below track parameters in their signatures; inside, parts are just parts: an
// `Expr<never>` is an `Expr<P>` for every `P`.

const group = (e: Expr<string>): Expr => ({
  parts: [{ _tag: "Text", text: "(" }, ...e.parts, { _tag: "Text", text: ")" }],
  binding: "Operand"
})

/**
 * Interpolates names, values and sub-expressions into literal text. A logical chain (`and`, `or`)
 * is interpolated in parentheses: the text around it may bind tighter (`NOT`, a comparison).
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
 * `a AND b AND …`, with parentheses only around an `or` operand: AND binds tighter than OR, and
 * both are associative. Parentheses are not free: some emulators (dynalite) take time that grows
 * steeply with the number of groups to parse a condition.
 *
 * @internal
 */
export const and = <const Args extends ReadonlyArray<Expr<string>>>(...exprs: Args): Expr<ParamsOf<Args[number]>> =>
  join(" AND ", exprs.map((e) => e.binding === "Or" ? group(e) : e), "And")

/**
 * `a OR b OR …`: no operand needs parentheses.
 *
 * @internal
 */
export const or = <const Args extends ReadonlyArray<Expr<string>>>(...exprs: Args): Expr<ParamsOf<Args[number]>> =>
  join(" OR ", exprs, "Or")

/**
 * `SET a = x, b = y REMOVE c, d`
 *
 * @internal
 */
export const update = <const Set extends ReadonlyArray<readonly [attribute: string, Expr<string>]>>(options: {
  readonly set: Set
  readonly remove?: ReadonlyArray<string> | undefined
}): Expr<ParamsOf<Set[number][1]>> => {
  const assignments = options.set.map(([attribute, e]) => expr`${name(attribute)} = ${e}`)
  const set = expr`SET ${join(", ", assignments, "Operand")}`
  const remove = options.remove ?? []
  return remove.length === 0 ? set : expr`${set} REMOVE ${join(", ", remove.map(name), "Operand")}`
}

/**
 * A projection of attribute names.
 *
 * @internal
 */
export const projection = (attributes: ReadonlyArray<string>): Expr => join(", ", attributes.map(name), "Operand")

/**
 * The expression fields of a request, as DynamoDB takes them.
 *
 * @internal
 */
export interface Fields {
  readonly ConditionExpression?: string
  readonly UpdateExpression?: string
  readonly FilterExpression?: string
  readonly ProjectionExpression?: string
  readonly ExpressionAttributeNames?: Record<string, string>
  readonly ExpressionAttributeValues?: Record<string, AttributeValue>
}

/**
 * Compiled expressions: the fields of a request with parameters `P`, given their values.
 *
 * @internal
 */
export type Compiled<P extends string> = (params: { readonly [K in P]: AttributeValue }) => Fields

/**
 * Compiles expressions once: names become `#n0, #n1, …`, constant values `:v0, :v1, …`, and
 * parameters `:name`; an attribute used twice, an equal constant used twice, or a parameter used
 * twice shares one placeholder. The text, the name map and the constant values are built here;
 * the returned function only adds the parameters' values.
 *
 * @internal
 */
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
