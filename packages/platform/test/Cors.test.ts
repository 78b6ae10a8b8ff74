/**
 * `IdempotencyMiddleware` on a route whose responses are CORS responses: a browser's script can read
 * `Idempotent-Replayed` and `Retry-After`, merged into the route's own `Access-Control-Expose-Headers`.
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
  "a CORS response exposes Idempotent-Replayed and Retry-After, fresh and replayed; another is left alone",
  () =>
    Effect.gen(function*() {
      const app = HttpRouter.empty.pipe(
        HttpRouter.post(
          "/orders",
          Effect.succeed(HttpServerResponse.text("created", {
            status: 201,
            headers: {
              "access-control-allow-origin": "https://app.example",
              "access-control-expose-headers": "X-Trace, retry-after"
            }
          }))
        ),
        HttpRouter.post("/plain", Effect.succeed(HttpServerResponse.text("created", { status: 201 })))
      )
      const store = yield* IdempotencyStore.makeMemory({ warn: false })
      const client = yield* serve(
        app.pipe(
          IdempotencyMiddleware.make({
            name: `cors-${randomUUID()}`,
            storedHeaders: ["content-type", "access-control-allow-origin", "access-control-expose-headers"]
          }),
          Effect.provideService(IdempotencyStore.IdempotencyStore, store)
        )
      )
      const key = randomUUID()
      const fresh = yield* client.send("POST", "/orders", { key, body: "{}" })
      const replay = yield* client.send("POST", "/orders", { key, body: "{}" })
      assert.strictEqual(fresh.status, 201)
      assert.strictEqual(fresh.headers["access-control-expose-headers"], "X-Trace, retry-after, Idempotent-Replayed")
      assert.strictEqual(replay.headers["idempotent-replayed"], "true")
      assert.strictEqual(replay.headers["access-control-expose-headers"], "X-Trace, retry-after, Idempotent-Replayed")
      const plain = yield* client.send("POST", "/plain", { key: randomUUID(), body: "{}" })
      assert.strictEqual(plain.status, 201)
      assert.isUndefined(plain.headers["access-control-expose-headers"])
    }),
  30_000
)
