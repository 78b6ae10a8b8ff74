import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as MutableRef from "effect/MutableRef"
import * as Predicate from "effect/Predicate"
import type * as Scope from "effect/Scope"
import type { Cluster, Redis } from "ioredis"
import type { Script } from "../RedisScripts.js"

/** @internal */
export class ClientClosed extends Error {
  constructor() {
    super("the Redis client is closed")
    this.name = "ClientClosed"
  }
}

/** @internal */
export class StoreClosed extends Error {
  constructor() {
    super("the store's scope is closed")
    this.name = "StoreClosed"
  }
}

/** @internal */
export interface Connection {
  readonly client: Redis | Cluster
  // sent only once connected, never left in ioredis's offline queue (README.md#failures-timeouts-and-interruption)
  readonly prepare: (script: Script) => (key: string, args: ReadonlyArray<string>) => Effect.Effect<unknown, unknown>
  readonly connected: Effect.Effect<void, unknown>
  readonly scanNodes: () => ReadonlyArray<Redis>
}

const isCluster = (client: Redis | Cluster): client is Cluster => client.isCluster

const isNoScript = (error: unknown): boolean =>
  Predicate.hasProperty(error, "message") && typeof error.message === "string" && error.message.startsWith("NOSCRIPT")

/** @internal */
export const make = (client: Redis | Cluster): Effect.Effect<Connection, never, Scope.Scope> =>
  Effect.gen(function*() {
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

    // One write per turn of the event loop: see README.md#the-scripts.
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
      // the fallback to `EVAL` is a step of the fiber: an interrupted caller sends nothing more
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
