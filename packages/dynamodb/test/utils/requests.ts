/**
 * Observing and shaping the requests a client sends, with SDK middleware.
 */
import { DynamoDbClient } from "@effect-idempotency/dynamodb"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import * as TestServices from "effect/TestServices"
import { randomUUID } from "node:crypto"

/** Sets `TestClock` to the wall clock, so records carry realistic times. */
export const startAtWallClock: Effect.Effect<void> = Effect.flatMap(
  TestServices.provideLive(Clock.currentTimeMillis),
  (now) => TestClock.setTime(now)
)

/**
 * Records every request the context's client sends (one per HTTP round trip) for the rest of the
 * scope. `take` returns the command names sent since the last `take` and forgets them.
 */
export const recordRequests: Effect.Effect<
  { readonly take: Effect.Effect<ReadonlyArray<string>> },
  never,
  DynamoDbClient.DynamoDbClient | Scope.Scope
> = Effect.gen(function*() {
  const { client } = yield* DynamoDbClient.DynamoDbClient
  const sent: Array<string> = []
  const name = `record-${randomUUID()}`
  yield* Effect.acquireRelease(
    Effect.sync(() =>
      client.middlewareStack.add(
        (next, context) => (args) => {
          sent.push(String(context.commandName).replace(/Command$/, ""))
          return next(args)
        },
        { step: "deserialize", name }
      )
    ),
    () => Effect.sync(() => client.middlewareStack.remove(name))
  )
  return { take: Effect.sync(() => sent.splice(0)) }
})

/**
 * Fails requests with `error()` while `when(n)` says so (n counts the requests seen so far, from
 * 1), for the rest of the scope: before they leave the client, or, with `afterSending`, after
 * DynamoDB applied them (a lost response). Returns how many requests were seen.
 */
export const injectFailures = (options: {
  readonly when: (n: number) => boolean
  readonly error: () => Error
  readonly afterSending?: boolean
}): Effect.Effect<{ readonly seen: Effect.Effect<number> }, never, DynamoDbClient.DynamoDbClient | Scope.Scope> =>
  Effect.gen(function*() {
    const { client } = yield* DynamoDbClient.DynamoDbClient
    const state = { seen: 0 }
    const name = `inject-${randomUUID()}`
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        client.middlewareStack.add(
          (next) => (args) => {
            state.seen++
            const fail = options.when(state.seen)
            if (!fail) return next(args)
            return options.afterSending === true
              ? next(args).then(() => Promise.reject(options.error()))
              : Promise.reject(options.error())
          },
          { step: "deserialize", name }
        )
      ),
      () => Effect.sync(() => client.middlewareStack.remove(name))
    )
    return { seen: Effect.sync(() => state.seen) }
  })

/** The error Node's HTTP client reports when the connection drops before the response. */
export const connectionReset = (): Error => Object.assign(new Error("socket hang up"), { code: "ECONNRESET" })
