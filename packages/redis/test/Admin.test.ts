/**
 * The admin primitives (`IdempotencyAdmin`) on the run's Redis server: the shared suite with the
 * server's clock (the default) and with Effect's, and what is Redis's own: `SCAN MATCH` patterns
 * that take an operation literally, a page cut inside one `SCAN` reply, a cursor of another kind.
 */
import { IdempotencyAdmin, IdempotencyStore } from "@effect-idempotency/core"
import { AdminConformance, StoreFixtures } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { expectReserved, reserveRequest, storeLayer, uniquePrefix } from "./utils/fixtures.js"

AdminConformance.suite("RedisStore admin (server clock)", storeLayer({ prefix: uniquePrefix("admin-server") }))

AdminConformance.suite(
  "RedisStore admin (Effect's clock)",
  storeLayer({ clock: "effect", prefix: uniquePrefix("admin-effect") })
)

const Live = Layer.provideMerge(IdempotencyAdmin.layer, storeLayer({ prefix: uniquePrefix("admin") }))

/** `count` records of `operation`, stuck at once (a lease of zero). */
const stuck = (operation: string, count: number) =>
  Effect.gen(function*() {
    const store = yield* IdempotencyStore.IdempotencyStore
    return yield* Effect.forEach(Array.from({ length: count }), () =>
      Effect.gen(function*() {
        const id = StoreFixtures.freshId({ operation })
        expectReserved(yield* store.reserve(reserveRequest(id, { lease: Duration.zero })))
        return id.key as string
      }))
  })

layer(Live, { timeout: "60 seconds" })("RedisStore admin", (it) => {
  it.effect("an operation with glob characters is matched literally", () =>
    Effect.gen(function*() {
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const suffix = crypto.randomUUID()
      const globbed = yield* stuck(`o*[a-z]?\\${suffix}`, 2)
      // `*` is not percent-encoded: unescaped, the first operation's pattern would match this one's keys
      yield* stuck(`oX[a-z]?\\${suffix}`, 3)
      const page = yield* admin.list({ operation: `o*[a-z]?\\${suffix}` })
      assert.deepStrictEqual(page.records.map((record) => record.key).sort(), globbed.sort())
      assert.isUndefined(page.cursor)
      const counts = (yield* admin.stats).filter((count) => count.operation.endsWith(suffix))
      assert.deepStrictEqual(counts.map((count) => count.count).sort(), [2, 3])
    }))

  it.effect("a page that ends inside one SCAN reply goes on after its last record, one record a page", () =>
    Effect.gen(function*() {
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const operation = `admin-pages-${crypto.randomUUID()}`
      const keys = yield* stuck(operation, 7)
      const seen: Array<string> = []
      let cursor: string | undefined
      for (let pages = 0; pages < 20; pages++) {
        const page = yield* admin.list({ operation, limit: 1, cursor })
        assert.isAtMost(page.records.length, 1)
        seen.push(...page.records.map((record) => record.key))
        cursor = page.cursor
        if (cursor === undefined) break
      }
      assert.deepStrictEqual(seen.sort(), keys.sort())
    }))

  it.effect("a cursor the store did not give is a StoreError", () =>
    Effect.gen(function*() {
      const admin = yield* IdempotencyAdmin.IdempotencyAdmin
      const result = yield* Effect.either(admin.list({ cursor: "not a cursor" }))
      assert.isTrue(Either.isLeft(result) && result.left._tag === "StoreError")
    }))
})
