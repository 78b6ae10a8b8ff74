/**
 * The Redis server of the run: the one `TEST_REDIS_URL` names (CI sets it to the machine's server;
 * database 15 unless the URL names one), else a `redis-server` started here on a free port of
 * 127.0.0.1 and stopped at the end. Neither is a failure of the run, never a skip.
 */
import { ping, redisServer, requireRedisServer, unlinkKeys } from "@effect-idempotency/test-support/Redis"
import { ServerError } from "@effect-idempotency/test-support/Servers"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import { randomUUID } from "node:crypto"
import type { TestProject } from "vitest/node"

const configured = process.env.TEST_REDIS_URL === "" ? undefined : process.env.TEST_REDIS_URL

/** The database the tests use on a configured server whose URL names none. */
const TEST_DATABASE = 15

const start = Effect.gen(function*() {
  if (configured !== undefined) {
    const url = new URL(configured)
    if (url.hostname !== "127.0.0.1" && url.hostname !== "localhost") {
      return yield* new ServerError({ message: `TEST_REDIS_URL must name a loopback server, not ${url.hostname}` })
    }
    yield* ping(Number(url.port === "" ? 6379 : url.port)).pipe(
      Effect.mapError((cause) =>
        new ServerError({ message: `TEST_REDIS_URL=${configured}: no Redis server answers there`, cause })
      )
    )
    // the tests' own database (15) unless the URL names one: a purge scans the whole keyspace of
    // its database page by page, so unrelated keys in the server's database 0 would crowd it out
    if (url.pathname === "" || url.pathname === "/") url.pathname = `/${TEST_DATABASE}`
    return { url: url.toString(), started: false }
  }
  const binary = yield* requireRedisServer.pipe(
    Effect.mapError((cause) =>
      new ServerError({
        message: "No Redis server for the tests: set TEST_REDIS_URL (redis://127.0.0.1:6379), or install redis-server",
        cause
      })
    )
  )
  const server = yield* redisServer(binary)
  return { url: server.url, started: true }
})

/** Deletes the keys the run's tests left under `prefix` (on a server the run did not start). */
const removeKeys = (url: string, prefix: string) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const client = new Redis(url, { maxRetriesPerRequest: 1 })
      client.on("error", () => {})
      return client
    }),
    (client) => Effect.tryPromise(() => unlinkKeys(client, `${prefix}*`)),
    (client) => Effect.sync(() => client.disconnect())
  ).pipe(Effect.ignore)

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const scope = Effect.runSync(Scope.make())
  const server = await Effect.runPromise(
    Scope.extend(start, scope).pipe(Effect.tapErrorCause(() => Scope.close(scope, Exit.void)))
  )
  // every key a test writes on the run's server starts with this (see `uniquePrefix`)
  const keyPrefix = `effect-idempotency-test:${randomUUID().slice(0, 8)}:`
  project.provide("redisUrl", server.url)
  project.provide("redisKeyPrefix", keyPrefix)
  return () =>
    Effect.runPromise(
      Effect.zipRight(server.started ? Effect.void : removeKeys(server.url, keyPrefix), Scope.close(scope, Exit.void))
    )
}
