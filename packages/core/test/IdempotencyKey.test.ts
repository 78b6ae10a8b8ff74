import { IdempotencyError, IdempotencyKey } from "@effect-idempotency/core"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FastCheck from "effect/FastCheck"
import * as Schema from "effect/Schema"

const reason = (input: unknown, options?: IdempotencyKey.Options) => {
  const result = IdempotencyKey.validate(input, options)
  return Either.isLeft(result) ? result.left : undefined
}

describe("IdempotencyKey", () => {
  it("accepts printable ASCII keys up to 255 characters", () => {
    for (
      const key of ["a", "8e0f3a52-2d5b-4c1a-9f7e-0b6f3c1d2e4f", "order:42/tenant=7", "~!$%&'()*+,-./:;<=>?@[]^_`{|}"]
    ) {
      assert.strictEqual(Either.getOrThrow(IdempotencyKey.validate(key)), key)
    }
    assert.isTrue(Either.isRight(IdempotencyKey.validate("k".repeat(255))))
  })

  it("accepts the quoted sf-string form of the header and decodes it to the bare key", () => {
    assert.strictEqual(Either.getOrThrow(IdempotencyKey.validate("\"abc-123\"")), "abc-123")
    assert.strictEqual(Either.getOrThrow(IdempotencyKey.validate(`"${"q".repeat(255)}"`)), "q".repeat(255))
  })

  it("rejects empty, over-long, control, space, separator and non-ASCII input with the rule and position", () => {
    assert.strictEqual(reason("")?.reason, "Empty")
    assert.strictEqual(reason("\"\"")?.reason, "Empty")
    const long = reason("k".repeat(256))
    assert.strictEqual(long?.reason, "TooLong")
    assert.strictEqual(long?.position, 255)
    assert.strictEqual(long?.length, 256)
    const cases: Array<[string, number]> = [
      ["abc def", 3],
      ["abc\u0000", 3],
      ["ab\ncd", 2],
      ["tab\t", 3],
      ["x#y", 1],
      ["\"in\\side\"", 3],
      ["key\u007f", 3],
      ["café", 3],
      ["emoji🧾", 5],
      ["a\"b", 1]
    ]
    for (const [input, position] of cases) {
      const error = reason(input)
      assert.strictEqual(error?.reason, "InvalidCharacter", input)
      assert.strictEqual(error?.position, position, input)
    }
    assert.strictEqual(reason("\"unterminated")?.reason, "UnterminatedQuote")
    assert.strictEqual(reason("\"")?.reason, "UnterminatedQuote")
    assert.strictEqual(reason(42)?.reason, "NotAString")
    assert.strictEqual(reason(undefined)?.reason, "NotAString")
  })

  it("honours a configured maximum length", () => {
    assert.isTrue(Either.isRight(IdempotencyKey.validate("k".repeat(40), { maxLength: 40 })))
    const error = reason("k".repeat(41), { maxLength: 40 })
    assert.strictEqual(error?.reason, "TooLong")
    assert.strictEqual(error?.maxLength, 40)
    assert.isTrue(Either.isRight(IdempotencyKey.validate("k".repeat(1000), { maxLength: 1024 })))
  })

  it("never echoes more than a short, escaped prefix of the input", () => {
    const secret = "s3cr3t-token-that-should-not-be-logged-in-full"
    const error = reason(`${secret} `)!
    assert.isAtMost(error.preview.length, IdempotencyKey.PREVIEW_LENGTH + 3)
    assert.notInclude(error.message, secret)
    assert.notInclude(JSON.stringify(error), secret)
    const control = reason("a\u0000\u001b[31m")!
    assert.strictEqual(control.preview, "\"a\\x00\\x1b[31m\"")
  })

  it.effect("decode fails with the typed error and succeeds with the branded key", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(IdempotencyKey.decode("has space"))
      assert.instanceOf(error, IdempotencyError.InvalidIdempotencyKey)
      assert.strictEqual(error._tag, "InvalidIdempotencyKey")
      const key = yield* IdempotencyKey.decode("\"ok\"")
      assert.strictEqual(key, "ok")
    }))

  it.effect("the schema decodes both forms and reports the rule in the parse error", () =>
    Effect.gen(function*() {
      const Body = Schema.Struct({ key: IdempotencyKey.IdempotencyKey })
      assert.deepStrictEqual(yield* Schema.decodeUnknown(Body)({ key: "\"abc\"" }), { key: "abc" as never })
      const failed = yield* Effect.flip(Schema.decodeUnknown(Body)({ key: "a b" }))
      assert.include(failed.message, "character not allowed at position 1")
      const short = IdempotencyKey.schema({ maxLength: 3 })
      assert.isTrue(Exit.isFailure(yield* Effect.exit(Schema.decodeUnknown(short)("abcd"))))
    }))

  it.effect("generate makes distinct valid UUID keys", () =>
    Effect.gen(function*() {
      const keys = yield* Effect.replicateEffect(IdempotencyKey.generate, 100)
      assert.strictEqual(new Set(keys).size, 100)
      for (const key of keys) {
        assert.match(key, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
        assert.isTrue(Either.isRight(IdempotencyKey.validate(key)))
      }
    }))

  it("unsafeMake throws the typed error", () => {
    assert.throws(() => IdempotencyKey.unsafeMake("bad key"), /character not allowed/)
  })

  const anyString = FastCheck.oneof(
    FastCheck.string({ maxLength: 300 }),
    FastCheck.fullUnicodeString({ maxLength: 300 }),
    FastCheck.string({ unit: "binary", maxLength: 300 }),
    FastCheck.string({ maxLength: 300 }).map((s) => `"${s}"`),
    FastCheck.string({ minLength: 250, maxLength: 260, unit: FastCheck.constantFrom("a", "Z", "-", "\"", "#", " ") })
  )

  it.effect.prop("every string decodes to an allowed key or fails with InvalidIdempotencyKey, never a defect", [
    anyString
  ], ([input]) =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(IdempotencyKey.decode(input))
      if (Exit.isSuccess(exit)) {
        const key = exit.value
        assert.isTrue(key.length >= 1 && key.length <= 255)
        assert.match(key, /^[\x21\x24-\x5b\x5d-\x7e]+$/)
        assert.isTrue(input === key || input === `"${key}"`)
      } else {
        const error = yield* Effect.flip(IdempotencyKey.decode(input))
        assert.instanceOf(error, IdempotencyError.InvalidIdempotencyKey)
        assert.isAtMost(error.preview.length, IdempotencyKey.PREVIEW_LENGTH * 6 + 3)
      }
    }), { fastCheck: { numRuns: 1000 } })

  it.prop("a string of allowed characters always decodes, bare and quoted", [
    FastCheck.string({
      minLength: 1,
      maxLength: 255,
      unit: FastCheck.integer({ min: 0x21, max: 0x7e }).filter((c) => c !== 0x22 && c !== 0x23 && c !== 0x5c).map((
        c
      ) => String.fromCharCode(c))
    })
  ], ([input]) => {
    assert.strictEqual(Either.getOrThrow(IdempotencyKey.validate(input)), input)
    assert.strictEqual(Either.getOrThrow(IdempotencyKey.validate(`"${input}"`)), input)
  }, { fastCheck: { numRuns: 1000 } })
})
