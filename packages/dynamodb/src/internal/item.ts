import type { AttributeValue } from "@aws-sdk/client-dynamodb"
import type { IdempotencyRecord } from "@effect-idempotency/core"
import { IdempotencyRecord as Record_ } from "@effect-idempotency/core"
import * as Either from "effect/Either"
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

/** @internal */
export type Item = Record<string, AttributeValue>

/** @internal */
export const Attribute = {
  status: "status",
  token: "token",
  fingerprint: "fingerprint",
  attempt: "attempt",
  leaseUntil: "lease_until",
  expiresAt: "expires_at",
  outcomeKind: "outcome_kind",
  outcomeBody: "outcome_body"
} as const

/** @internal */
export interface Names {
  readonly key: string
  readonly ttl: string
}

/** @internal */
export const toTtlSeconds = (expiresAtMillis: number): number => Math.ceil(expiresAtMillis / 1000)

const S = <A, I extends string>(schema: Schema.Schema<A, I>) => Schema.Struct({ S: schema })
const N = Schema.Struct({ N: Schema.NumberFromString })

const ItemSchema = Schema.Struct({
  [Attribute.status]: S(Record_.Status),
  [Attribute.token]: S(Schema.String),
  [Attribute.fingerprint]: S(Schema.String),
  [Attribute.attempt]: N,
  [Attribute.leaseUntil]: N,
  [Attribute.expiresAt]: N,
  [Attribute.outcomeKind]: Schema.optional(S(Schema.String)),
  [Attribute.outcomeBody]: Schema.optional(S(Schema.String))
})

const decodeItem = Schema.decodeUnknownEither(ItemSchema)

const fromFields = (fields: typeof ItemSchema.Type): IdempotencyRecord.IdempotencyRecord => ({
  status: fields.status.S,
  token: fields.token.S,
  fingerprint: fields.fingerprint.S,
  attempt: fields.attempt.N,
  leaseUntil: fields.lease_until.N,
  expiresAt: fields.expires_at.N,
  outcome: fields.status.S === "COMPLETED" && fields.outcome_kind !== undefined
    ? Record_.outcomeFromColumns(fields.outcome_kind.S, fields.outcome_body?.S ?? "")
    : undefined
})

const decodeWithSchema = (item: unknown): Either.Either<IdempotencyRecord.IdempotencyRecord, ParseResult.ParseError> =>
  Either.map(decodeItem(item), fromFields)

// The fast path accepts only what `ItemSchema` accepts; anything else is left to the schema.

const own = (u: unknown, key: string): unknown =>
  typeof u === "object" && u !== null && Object.hasOwn(u, key)
    ? (u as { readonly [key: string]: unknown })[key]
    : undefined

const stringOf = (attributeValue: unknown): string | undefined => {
  const text = own(attributeValue, "S")
  return typeof text === "string" ? text : undefined
}

const numberOf = (attributeValue: unknown): number | undefined => {
  const text = own(attributeValue, "N")
  if (typeof text !== "string" || text.trim() === "") return undefined
  const n = Number(text)
  return Number.isNaN(n) ? undefined : n
}

const isStatus = (s: string | undefined): s is IdempotencyRecord.Status =>
  s === "IN_PROGRESS" || s === "COMPLETED" || s === "FAILED"

const decodeFast = (item: unknown): IdempotencyRecord.IdempotencyRecord | undefined => {
  const status = stringOf(own(item, Attribute.status))
  const token = stringOf(own(item, Attribute.token))
  const fingerprint = stringOf(own(item, Attribute.fingerprint))
  const attempt = numberOf(own(item, Attribute.attempt))
  const leaseUntil = numberOf(own(item, Attribute.leaseUntil))
  const expiresAt = numberOf(own(item, Attribute.expiresAt))
  if (
    !isStatus(status) || token === undefined || fingerprint === undefined || attempt === undefined ||
    leaseUntil === undefined || expiresAt === undefined
  ) return undefined
  const kindValue = own(item, Attribute.outcomeKind)
  const bodyValue = own(item, Attribute.outcomeBody)
  const kind = stringOf(kindValue)
  const body = stringOf(bodyValue)
  if ((kindValue !== undefined && kind === undefined) || (bodyValue !== undefined && body === undefined)) {
    return undefined
  }
  return {
    status,
    token,
    fingerprint,
    attempt,
    leaseUntil,
    expiresAt,
    outcome: status === "COMPLETED" && kind !== undefined ? Record_.outcomeFromColumns(kind, body ?? "") : undefined
  }
}

/** @internal */
export const decode = (item: Item): Either.Either<IdempotencyRecord.IdempotencyRecord, ParseResult.ParseError> => {
  const record = decodeFast(item)
  return record !== undefined ? Either.right(record) : decodeWithSchema(item)
}

/** @internal */
export const utf8Length = (s: string): number => {
  let bytes = 0
  for (let i = 0; i < s.length; i++) {
    const code = s.charCodeAt(i)
    if (code < 0x80) bytes += 1
    else if (code < 0x800) bytes += 2
    else if (code >= 0xd800 && code <= 0xdbff && i + 1 < s.length) {
      const next = s.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4
        i++
      } else bytes += 3
    } else bytes += 3
  }
  return bytes
}

const NUMBER_BYTES = 21

/** Attributes a completion does not rewrite, and DynamoDB's own accounting. */
const SLACK_BYTES = 1024

/** @internal */
export const completedItemBytes = (options: {
  readonly names: Names
  readonly id: string
  readonly token: string
  readonly kind: string
  readonly body: string
}): number => {
  const { body, id, kind, names, token } = options
  const fixedNames = Object.values(Attribute).reduce((sum, attribute) => sum + utf8Length(attribute), 0)
  return fixedNames + utf8Length(names.key) + utf8Length(names.ttl) + utf8Length(id) + utf8Length(token) +
    utf8Length("IN_PROGRESS") + 4 * NUMBER_BYTES + utf8Length(kind) + utf8Length(body) + SLACK_BYTES
}
