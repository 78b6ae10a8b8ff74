/**
 * The Redis server of the run: the one `TEST_REDIS_URL` names (CI sets it to the machine's server),
 * else a `redis-server` started here on a free port of 127.0.0.1 and stopped at the end. Neither
 * is a failure of the run, never a skip.
 */
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import type { TestProject } from "vitest/node"
import { ping, redisServer, requireRedisServer, ServerError } from "./utils/servers.js"

const configured = process.env.TEST_REDIS_URL === "" ? undefined : process.env.TEST_REDIS_URL

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
    return { url: configured, started: false }
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

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const scope = Effect.runSync(Scope.make())
  const close = () => Effect.runPromise(Scope.close(scope, Exit.void))
  const server = await Effect.runPromise(
    Scope.extend(start, scope).pipe(Effect.tapErrorCause(() => Scope.close(scope, Exit.void)))
  )
  project.provide("redisUrl", server.url)
  return close
}
