/**
 * Which outcomes of a handler are kept (README.md#which-outcomes-are-kept): every status, once with the
 * default response policy and once with `recordUnlessTransient`; a kept one is replayed, another runs
 * the handler again on the retry.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { HttpIdempotency, IdempotentFetch } from "@effect-idempotency/http"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"

const STATUSES = [200, 201, 400, 408, 409, 422, 425, 429, 500, 502, 503, 504] as const

/** For each status: whether the retry of a request answered with it was replayed (the handler ran once). */
const kept = (record: ((response: HttpIdempotency.ResponseHead) => boolean) | undefined) =>
  Effect.forEach(STATUSES, (status) =>
    Effect.gen(function*() {
      let runs = 0
      const handler = IdempotentFetch.wrap(
        () => {
          runs++
          return new Response(`status ${status}`, { status })
        },
        { name: `kept-${status}`, layer: IdempotencyStore.layerMemoryWith({ warn: false }), record }
      )
      const post = () =>
        Effect.promise(() =>
          handler(new Request("http://localhost/orders", { method: "POST", headers: { "idempotency-key": "k-1" } }))
        )
      const first = yield* post()
      const retry = yield* post()
      assert.strictEqual(first.status, status)
      assert.strictEqual(retry.status, status)
      yield* Effect.promise(() => handler.dispose())
      const replayed = retry.headers.get("idempotent-replayed") === "true"
      assert.strictEqual(runs, replayed ? 1 : 2, `status ${status}`)
      return [status, replayed] as const
    }))

describe("the outcomes kept", () => {
  it.live("by default, every status below 500; a 5xx (503 and 504 too) runs again on the retry", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        Object.fromEntries(yield* kept(undefined)),
        Object.fromEntries(STATUSES.map((status) => [status, status < 500]))
      )
    }))

  it.live("recordUnlessTransient: all but 408, 425, 429 and 503; a 500, 502 or 504 is replayed", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        Object.fromEntries(yield* kept(HttpIdempotency.recordUnlessTransient)),
        Object.fromEntries(STATUSES.map((status) => [status, ![408, 425, 429, 503].includes(status)]))
      )
    }))
})
