import { IdempotencyKey, IdempotencyRecord } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { item, scriptedStore } from "./utils/scripted.js"

// Every item the store reads (a GetItem's, a failed condition's, an extend's old item) is read by
// one decoder. The oracle is the item as documented (README, "The item"), as a schema: the store
// must read what it accepts the way it reads it, and fail with a StoreError (never a defect) on
// anything else.

const S = <A, I extends string>(schema: Schema.Schema<A, I>) => Schema.Struct({ S: schema })
const N = Schema.Struct({ N: Schema.NumberFromString })
const Documented = Schema.Struct({
  status: S(Schema.Literal("IN_PROGRESS", "COMPLETED", "FAILED")),
  token: S(Schema.String),
  fingerprint: S(Schema.String),
  attempt: N,
  lease_until: N,
  expires_at: N,
  outcome_kind: Schema.optional(S(Schema.String)),
  outcome_body: Schema.optional(S(Schema.String))
})

const oracle = (item: unknown) =>
  Either.map(Schema.decodeUnknownEither(Documented)(item), (fields): IdempotencyRecord.IdempotencyRecord => ({
    status: fields.status.S,
    token: fields.token.S,
    fingerprint: fields.fingerprint.S,
    attempt: fields.attempt.N,
    leaseUntil: fields.lease_until.N,
    expiresAt: fields.expires_at.N,
    outcome: fields.status.S === "COMPLETED" && fields.outcome_kind !== undefined
      ? IdempotencyRecord.outcomeFromColumns(fields.outcome_kind.S, fields.outcome_body?.S ?? "")
      : undefined
  }))

const id = IdempotencyRecord.makeRecordId({ operation: "decode", key: IdempotencyKey.unsafeMake("key-1") })

/** Reads `item` through `get`, at the clock time 0: a live record has `expires_at > 0`. */
const read = (item: unknown) =>
  Effect.flatMap(
    scriptedStore(() => Promise.resolve({ Item: item })),
    ({ store }) => Effect.exit(store.get(id))
  )

const strings = FastCheck.oneof(FastCheck.string(), FastCheck.constantFrom("", "sha256:abc", "tok-1"))
const numberTexts = FastCheck.oneof(
  FastCheck.integer().map(String),
  FastCheck.double().map(String),
  FastCheck.constantFrom(
    "",
    " ",
    "abc",
    "NaN",
    "Infinity",
    "-Infinity",
    "1e3",
    "0x10",
    " 12 ",
    "-0",
    "1_0",
    "\n",
    "12abc"
  )
)
/** A well-formed value most of the time; otherwise absent, or of another type or shape. */
const attribute = (wellFormed: FastCheck.Arbitrary<unknown>) =>
  FastCheck.oneof(
    { weight: 8, arbitrary: wellFormed },
    { weight: 1, arbitrary: FastCheck.constant(undefined) },
    {
      weight: 2,
      arbitrary: FastCheck.constantFrom<unknown>(
        { N: "1" },
        { S: "x" },
        { BOOL: true },
        { NULL: true },
        { S: 1 },
        { N: 1 },
        { S: "COMPLETED", N: "1" },
        {},
        null,
        "S",
        [{ S: "x" }]
      )
    }
  )
const sAttribute = (values: FastCheck.Arbitrary<string>) => attribute(values.map((S) => ({ S })))
const nAttribute = attribute(numberTexts.map((N) => ({ N })))

const items = FastCheck.record({
  id: FastCheck.constant({ S: id.value }),
  status: sAttribute(FastCheck.constantFrom("IN_PROGRESS", "COMPLETED", "FAILED", "completed", "", "OTHER")),
  token: sAttribute(strings),
  fingerprint: sAttribute(strings),
  attempt: nAttribute,
  lease_until: nAttribute,
  expires_at: nAttribute,
  outcome_kind: sAttribute(FastCheck.constantFrom("Success", "Failure", "Timeout", "Omitted", "Unknown", "")),
  outcome_body: sAttribute(strings),
  extra: attribute(FastCheck.constant({ S: "ignored" }))
}).map((item) => Object.fromEntries(Object.entries(item).filter(([, value]) => value !== undefined)))

describe("reading items", () => {
  it.effect.prop(
    "the store reads an item as the documented schema does, or fails with a StoreError",
    [items],
    ([item]) =>
      Effect.gen(function*() {
        const exit = yield* read(item)
        const expected = oracle(item)
        if (Either.isRight(expected)) {
          const record = expected.right
          assert.isTrue(Exit.isSuccess(exit), `${JSON.stringify(item)}: ${String(exit)}`)
          if (Exit.isSuccess(exit)) {
            assert.deepStrictEqual(exit.value, record.expiresAt > 0 ? Option.some(record) : Option.none())
          }
        } else {
          const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
          assert.isTrue(Option.isSome(error), `${JSON.stringify(item)} must fail with an error, not ${String(exit)}`)
          if (Option.isSome(error)) {
            assert.strictEqual(error.value._tag, "StoreError")
            assert.strictEqual(error.value.method, "get")
            assert.isTrue(ParseResult.isParseError(error.value.cause), `${JSON.stringify(item)}`)
          }
        }
      }),
    { fastCheck: { numRuns: 300 } }
  )

  it.effect("a well-formed record", () =>
    Effect.gen(function*() {
      const exit = yield* read({
        ...item(id, { status: "COMPLETED", token: "tok", attempt: 2, leaseUntil: 10, expiresAt: 20 }),
        ttl: { N: "1" },
        outcome_kind: { S: "Failure" },
        outcome_body: { S: "{\"code\":1}" }
      })
      assert.deepStrictEqual(
        exit,
        Exit.succeed(Option.some({
          status: "COMPLETED",
          token: "tok",
          fingerprint: "sha256:x",
          attempt: 2,
          leaseUntil: 10,
          expiresAt: 20,
          outcome: IdempotencyRecord.StoredOutcome.Failure({ error: "{\"code\":1}" })
        }))
      )
    }))

  it.effect("malformed items: a StoreError that explains them, never a defect", () =>
    Effect.gen(function*() {
      const base = item(id, { status: "IN_PROGRESS", token: "tok", leaseUntil: 10, expiresAt: 20 })
      const malformed: ReadonlyArray<readonly [string, unknown]> = [
        ["an unknown status", { ...base, status: { S: "SOMETHING_ELSE" } }],
        ["a missing token", { ...base, token: undefined }],
        ["a number where a string belongs", { ...base, fingerprint: { N: "1" } }],
        ["a number that does not parse", { ...base, attempt: { N: "one" } }],
        ["an empty number", { ...base, expires_at: { N: " " } }],
        ["an outcome kind of the wrong type", { ...base, outcome_kind: { N: "1" } }],
        ["an outcome body of the wrong type", { ...base, outcome_body: { BOOL: true } }],
        ["an attribute that is not an attribute value", { ...base, lease_until: "10" }],
        ["no item at all", "not an item"]
      ]
      for (const [what, item] of malformed) {
        const exit = yield* read(item)
        const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
        assert.isTrue(Option.isSome(error) && error.value._tag === "StoreError", `${what}: ${String(exit)}`)
      }
    }))
})
