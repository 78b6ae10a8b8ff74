/**
 * `IdempotencyMiddleware` on a whole app (`HttpServer.serve(app, middleware)` runs the app
 * uninterruptibly): every POST of the app is idempotent, every GET untouched.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotencyMiddleware } from "@effect-idempotency/platform"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { randomUUID } from "node:crypto"
import { serve } from "./utils/server.js"

it.scopedLive(
  "a middleware around the whole app covers its POST routes and leaves its GET routes alone",
  () =>
    Effect.gen(function*() {
      let posts = 0
      let gets = 0
      const app = HttpRouter.empty.pipe(
        HttpRouter.post("/orders", Effect.sync(() => HttpServerResponse.text(`order ${++posts}`, { status: 201 }))),
        HttpRouter.get("/orders", Effect.sync(() => HttpServerResponse.text(`list ${++gets}`)))
      )
      const store = yield* IdempotencyStore.makeMemory({ warn: false })
      const client = yield* serve(
        app.pipe(
          IdempotencyMiddleware.make({ name: "app" }),
          Effect.provideService(IdempotencyStore.IdempotencyStore, store)
        )
      )
      const key = randomUUID()
      const first = yield* client.send("POST", "/orders", { key, body: "{}" })
      const replay = yield* client.send("POST", "/orders", { key, body: "{}" })
      assert.deepStrictEqual([first.status, first.text], [201, "order 1"])
      assert.deepStrictEqual([replay.status, replay.text, replay.headers["idempotent-replayed"]], [
        201,
        "order 1",
        "true"
      ])
      assert.strictEqual((yield* client.send("POST", "/orders", { body: "{}" })).status, 400)
      assert.strictEqual((yield* client.send("GET", "/orders")).text, "list 1")
      assert.strictEqual((yield* client.send("GET", "/orders")).text, "list 2")
      assert.strictEqual(posts, 1)
    }),
  30_000
)
