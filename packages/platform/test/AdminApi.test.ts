/**
 * The admin service over HTTP: `IdempotencyAdminApi.toWebHandler` served by a real Node server on
 * loopback, reached by `layerClient` over fetch, on the memory store. The operator's path (find a
 * stuck key, inspect it, unblock it fenced on its attempt, retry once), the token (missing, wrong,
 * too short), every action in the log without the key, and the failures a client meets: a store
 * failure behind the endpoint (its cause bounded), an endpoint that is down.
 */
import {
  Idempotency,
  IdempotencyAdmin,
  IdempotencyError,
  IdempotencyKey,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import { IdempotencyAdminApi } from "@effect-idempotency/platform"
import { StoreFixtures } from "@effect-idempotency/testing"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { randomUUID } from "node:crypto"
import { serveWeb } from "./utils/webServer.js"

const TOKEN = Redacted.make(`token-${randomUUID()}`)

/** The endpoint over `admin`, served on loopback, and what it logged. */
const endpoint = (admin: Layer.Layer<IdempotencyAdmin.IdempotencyAdmin>) =>
  Effect.gen(function*() {
    const logs: Array<{ readonly message: string; readonly level: string; readonly annotations: string }> = []
    const logger = Logger.make(({ annotations, logLevel, message }) => {
      logs.push({
        message: String(message),
        level: logLevel.label,
        annotations: JSON.stringify(Object.fromEntries(annotations))
      })
    })
    const web = yield* Effect.acquireRelease(
      Effect.sync(() =>
        IdempotencyAdminApi.toWebHandler({
          layer: Layer.merge(admin, Logger.replace(Logger.defaultLogger, logger)),
          token: TOKEN,
          prefix: "/admin"
        })
      ),
      (web) => Effect.promise(web.dispose)
    )
    const urls: Array<string> = []
    const url = yield* serveWeb((request) => {
      urls.push(request.url)
      return web.handler(request)
    })
    return { url: `${url}/admin`, root: url, logs, urls }
  })

const clientOf = (baseUrl: string, token = TOKEN) =>
  Layer.build(IdempotencyAdminApi.layerClient({ baseUrl, token }).pipe(Layer.provide(FetchHttpClient.layer))).pipe(
    Effect.map((context) =>
      context.unsafeMap.get(IdempotencyAdmin.IdempotencyAdmin.key) as IdempotencyAdmin.IdempotencyAdmin["Type"]
    )
  )

const memory = IdempotencyAdmin.layer.pipe(Layer.provideMerge(IdempotencyStore.layerMemory), Layer.orDie)

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  assert.isTrue(Exit.isFailure(exit))
  const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
  assert.isTrue(Option.isSome(failure), String(exit))
  return Option.getOrThrow(failure)
}

describe("IdempotencyAdminApi", () => {
  it.scopedLive("the operator's path through the endpoint: list, inspect, a fenced unblock, a retry that runs once", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(memory)
      const store = context.unsafeMap.get(IdempotencyStore.IdempotencyStore.key) as IdempotencyStore.IdempotencyStore[
        "Type"
      ]
      const served = yield* endpoint(Layer.succeedContext(context))
      const admin = yield* clientOf(served.url)

      const operation = `admin-${randomUUID().slice(0, 8)}`
      const key = IdempotencyKey.unsafeMake(`order-${randomUUID()}`)
      const token = `fencing-${randomUUID()}`
      StoreFixtures.expectReserved(
        yield* store.reserve(
          StoreFixtures.reserveRequest(IdempotencyRecord.makeRecordId({ operation, key }), {
            token,
            lease: Duration.millis(50)
          })
        )
      )
      yield* Effect.sleep("120 millis")

      const page = yield* admin.list({ state: "stuck", operation, limit: 10 })
      assert.deepStrictEqual(page.records.map((r) => [r.operation, r.key, r.state, r.attempt, r.scope]), [[
        operation,
        key,
        "stuck",
        1,
        undefined
      ]])
      assert.notInclude(JSON.stringify(page), token)
      const record = yield* admin.get({ operation, key })
      assert.isTrue(Option.isSome(record))
      assert.strictEqual(Option.getOrThrow(record).status, "IN_PROGRESS")

      const wrong = failureOf(
        yield* Effect.exit(admin.unblock({ operation, key }, { reason: "INC-1", expect: { attempt: 2 } }))
      )
      assert.deepInclude(wrong, { _tag: "UnblockRefused", reason: "changed", attempt: 1 })
      yield* admin.unblock({ operation, key }, { reason: "INC-1", expect: { attempt: 1 } })
      assert.isTrue(Option.isNone(yield* admin.get({ operation, key })))

      let executions = 0
      const retry = Effect.sync(() => ++executions).pipe(
        Idempotency.once({ operation, key, payload: { n: 1 }, success: Schema.Number }),
        Effect.provideService(IdempotencyStore.IdempotencyStore, store)
      )
      assert.strictEqual(yield* retry, 1)
      assert.strictEqual(yield* retry, 1)
      assert.strictEqual(executions, 1)
      assert.deepInclude(yield* admin.stats, { operation, state: "completed", count: 1 })
      assert.isNumber(yield* admin.purge({ limit: 10 }))

      const invalid = failureOf(yield* Effect.exit(admin.get({ operation, key: `bad key ${"x".repeat(3000)}` })))
      assert.strictEqual(invalid._tag, "InvalidTarget")

      // every action is logged with the key's hash, never the key, nor either token
      const actions = served.logs.filter((log) => log.message.startsWith("idempotency admin: "))
      assert.deepStrictEqual(actions.map((log) => log.message.slice("idempotency admin: ".length)), [
        "list",
        "inspect",
        "unblock",
        "unblock",
        "inspect",
        "stats",
        "purge",
        "inspect"
      ])
      assert.include(actions[2]!.annotations, "\"idempotency.admin.result\":\"UnblockRefused\"")
      assert.include(actions[3]!.annotations, IdempotencyKey.hash(key))
      const everything = JSON.stringify(served.logs)
      assert.notInclude(everything, key)
      // nor in a URL, which access logs keep
      assert.isAbove(served.urls.length, 7)
      assert.isTrue(served.urls.every((url) => !url.includes(key)))
      assert.notInclude(everything, token)
      assert.notInclude(everything, Redacted.value(TOKEN))
    }))

  it.scopedLive("a missing or wrong token is a 401, logged without either token; a short one is refused", () =>
    Effect.gen(function*() {
      const served = yield* endpoint(memory)
      const missing = yield* Effect.promise(() => fetch(`${served.url}/stats`))
      assert.strictEqual(missing.status, 401)
      const wrongToken = `${Redacted.value(TOKEN)}x`
      const wrong = yield* Effect.promise(() =>
        fetch(`${served.url}/stats`, { headers: { authorization: `Bearer ${wrongToken}` } })
      )
      assert.strictEqual(wrong.status, 401)
      const right = yield* Effect.promise(() =>
        fetch(`${served.url}/stats`, { headers: { authorization: `Bearer ${Redacted.value(TOKEN)}` } })
      )
      assert.strictEqual(right.status, 200)
      // the client: a refused token is a StoreError whose cause says so
      const admin = yield* clientOf(served.url, Redacted.make(wrongToken))
      const refused = failureOf(yield* Effect.exit(admin.stats))
      assert.strictEqual(refused._tag, "StoreError")
      assert.strictEqual((refused.cause as { readonly _tag: string })._tag, "Unauthorized")
      const warnings = served.logs.filter((log) => log.level === "WARN")
      assert.strictEqual(warnings.length, 3)
      assert.notInclude(JSON.stringify(served.logs), wrongToken)
      assert.notInclude(JSON.stringify(served.logs), Redacted.value(TOKEN))
      // a token short enough to guess is refused when the handler is made
      assert.throws(
        () => IdempotencyAdminApi.toWebHandler({ layer: memory, token: Redacted.make("short") }),
        /at least 16/
      )
    }))

  it.scopedLive("a store failure behind the endpoint keeps its type, its cause bounded; an endpoint that is down is StoreUnavailable", () =>
    Effect.gen(function*() {
      const secret = "x".repeat(5000)
      const failing = Layer.succeed(IdempotencyAdmin.IdempotencyAdmin, {
        get: () => Effect.fail(new IdempotencyError.StoreUnavailable({ method: "read", cause: new Error(secret) })),
        list: () => Effect.fail(new IdempotencyError.StoreError({ method: "list", cause: new Error(secret) })),
        unblock: () => Effect.die("unused"),
        stats: Effect.die("unused"),
        purge: () => Effect.die("unused")
      })
      const served = yield* endpoint(failing)
      const admin = yield* clientOf(served.url)
      const unavailable = failureOf(yield* Effect.exit(admin.get({ operation: "op", key: "k-1" })))
      assert.strictEqual(unavailable._tag, "StoreUnavailable")
      assert.isBelow(String(unavailable.cause).length, 400)
      const error = failureOf(yield* Effect.exit(admin.list()))
      assert.strictEqual(error._tag, "StoreError")
      assert.isBelow(String(error.cause).length, 400)

      // nothing listens there any more
      const down = yield* Effect.scoped(endpoint(memory)).pipe(Effect.map((served) => served.url))
      const unreachable = yield* clientOf(down)
      const exit = failureOf(yield* Effect.exit(unreachable.stats))
      assert.strictEqual(exit._tag, "StoreUnavailable")
    }))
})
