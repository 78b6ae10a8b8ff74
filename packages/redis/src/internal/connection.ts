import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as MutableRef from "effect/MutableRef"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import type { Cluster, Redis } from "ioredis"
import type { Script } from "../RedisScripts.js"

/**
 * The connection is closed for good (`QUIT`, `disconnect()`, or a retry strategy that gave up).
 *
 * @internal
 */
export class ClientClosed extends Error {
  constructor() {
    super("the Redis client is closed")
    this.name = "ClientClosed"
  }
}

/**
 * The scope of the store was closed: it no longer watches its client's connection.
 *
 * @internal
 */
export class StoreClosed extends Error {
  constructor() {
    super("the store's scope is closed")
    this.name = "StoreClosed"
  }
}

/**
 * Sends the store's scripts through a client.
 *
 * @internal
 */
export interface Connection {
  readonly client: Redis | Cluster
  /**
   * A script, ready to run on one key with its `ARGV`. A call is sent only once the client is
   * connected: when it is not, the call waits for the next connection attempt, and fails with that
   * attempt's error. Nothing is left in ioredis's offline queue, so an interrupted call sends
   * nothing later.
   */
  readonly prepare: (script: Script) => (key: string, args: ReadonlyArray<string>) => Effect.Effect<unknown, unknown>
  /**
   * Succeeds at once when the client is connected; otherwise waits for the next connection attempt
   * and fails with its error.
   */
  readonly connected: Effect.Effect<void, unknown>
  /** The nodes to scan for keys: the client, or every master of a cluster. */
  readonly scanNodes: () => ReadonlyArray<Redis>
}

const isCluster = (client: Redis | Cluster): client is Cluster => client.isCluster

const isNoScript = (error: unknown): boolean =>
  Predicate.hasProperty(error, "message") && typeof error.message === "string" && error.message.startsWith("NOSCRIPT")

/**
 * Watches the client's connection for the life of the scope.
 *
 * @internal
 */
export const make = (client: Redis | Cluster): Effect.Effect<Connection, never, Scope.Scope> =>
  Effect.gen(function*() {
    // Callers that wait for a connection wait on the current deferred; the client's events settle
    // it and put a new one in its place.
    const next = () => Deferred.unsafeMake<void, unknown>(FiberId.none)
    const waiting = MutableRef.make(next())
    const released = MutableRef.make(false)
    const settle = (exit: Exit.Exit<void, unknown>) => Deferred.unsafeDone(MutableRef.getAndSet(waiting, next()), exit)
    const onReady = () => settle(Exit.void)
    const onError = (error: unknown) => settle(Exit.fail(error))
    const onEnd = () => settle(Exit.fail(new ClientClosed()))
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        client.on("ready", onReady)
        client.on("error", onError)
        client.on("end", onEnd)
      }),
      () =>
        Effect.sync(() => {
          client.off("ready", onReady)
          client.off("error", onError)
          client.off("end", onEnd)
          // nothing settles a wait from now on: a call made after the scope closed fails
          MutableRef.set(released, true)
          settle(Exit.fail(new StoreClosed()))
        })
    )

    const connected: Effect.Effect<void, unknown> = Effect.suspend(() => {
      if (MutableRef.get(released)) return Effect.fail(new StoreClosed())
      switch (client.status) {
        case "ready":
          return Effect.void
        case "end":
          return Effect.fail(new ClientClosed())
        case "wait":
          // a client made with `lazyConnect` that never connected: the first call connects it
          return Effect.zipRight(
            Effect.sync(() => {
              client.connect().catch(() => {})
            }),
            Deferred.await(MutableRef.get(waiting))
          )
        default:
          return Deferred.await(MutableRef.get(waiting))
      }
    })

    // While commands await their replies, the scripts sent in one turn of the event loop leave in
    // one write: the socket is corked by the first and uncorked once the turn's callbacks and
    // microtasks have run. Each command is still handed to ioredis at once (its `commandTimeout` runs
    // from then, and it never waits in a queue of the client): only the system call is shared. Under
    // concurrency this spares a write, and a wake-up of the server, per command; on an idle
    // connection a command is written at once, so a lone call waits for nothing. A cluster client
    // writes to several nodes, one by one.
    let corked: Redis["stream"] | undefined
    const uncork = () => {
      corked?.uncork()
      corked = undefined
    }
    const coalesce = () => {
      if (corked !== undefined || isCluster(client)) return
      const stream: Redis["stream"] | undefined = client.stream
      if (stream === undefined || client.commandQueue.length === 0) return
      corked = stream
      stream.cork()
      process.nextTick(uncork)
    }

    const prepare = (script: Script) => {
      // Whether this client sent the script whole once. The first call sends `EVAL` (the server
      // caches the script); later calls send `EVALSHA`, and `EVAL` again after `NOSCRIPT` (a
      // restarted or flushed server, another node of a cluster).
      let sent = false
      const evalWhole = (key: string, args: ReadonlyArray<string>): Promise<unknown> => {
        coalesce()
        return client.eval(script.lua, 1, key, ...args).then((reply) => {
          sent = true
          return reply
        })
      }
      const evalSha = (key: string, args: ReadonlyArray<string>): Promise<unknown> => {
        coalesce()
        return client.evalsha(script.sha, 1, key, ...args)
      }
      const whole = (key: string, args: ReadonlyArray<string>) =>
        Effect.tryPromise({ try: () => evalWhole(key, args), catch: (error) => error })
      // the fallback to `EVAL` is a step of the fiber, not of the promise: a caller that was
      // interrupted, or whose deadline passed, while `EVALSHA` was in flight sends nothing more
      const send = (key: string, args: ReadonlyArray<string>): Effect.Effect<unknown, unknown> =>
        sent
          ? Effect.catchIf(
            Effect.tryPromise({ try: () => evalSha(key, args), catch: (error) => error }),
            isNoScript,
            () => whole(key, args)
          )
          : whole(key, args)
      return (key: string, args: ReadonlyArray<string>): Effect.Effect<unknown, unknown> =>
        Effect.suspend(() => client.status === "ready" ? send(key, args) : Effect.zipRight(connected, send(key, args)))
    }

    return {
      client,
      connected,
      prepare,
      scanNodes: () => isCluster(client) ? client.nodes("master") : [client]
    }
  })
