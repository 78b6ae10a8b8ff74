/**
 * The processes the tests start themselves (Redis, DynamoDB Local, MariaDB): a free loopback port,
 * an executable found the way a developer's machine and CI have it, and a server spawned, awaited
 * until it answers and stopped with its scope. A missing binary or a server that does not start is a
 * failure that says what to install, never a skip.
 *
 * @example
 * const port = yield* Servers.freePort
 * const child = yield* Servers.spawn({
 *   name: "redis-server",
 *   command: binary,
 *   args: ["--port", String(port)],
 *   ready: ping(port),
 *   timeout: "20 seconds"
 * })
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type { ChildProcess } from "node:child_process"
import { spawn as spawnChild } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"

/** A server of the run could not be had: the message says what to install or to set. */
export class ServerError extends Data.TaggedError("ServerError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** An error's message, or the value as text. */
export const describe = (cause: unknown): string => cause instanceof Error ? cause.message : String(cause)

/** A port that was free a moment ago on 127.0.0.1 (nothing listens on it). */
export const freePort: Effect.Effect<number, ServerError> = Effect.async((resume) => {
  const server = net.createServer()
  server.once("error", (cause) => resume(Effect.fail(new ServerError({ message: "no free port", cause }))))
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

/**
 * Listens with `server` on a free port of 127.0.0.1 until the scope closes, and yields the port;
 * `onClose` runs before the server closes (to destroy the connections still open, say).
 */
export const listen = (server: net.Server, onClose?: () => void): Effect.Effect<number, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<number>((resume) => {
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as net.AddressInfo).port)))
    }),
    () =>
      Effect.async<void>((resume) => {
        onClose?.()
        server.close(() => resume(Effect.void))
      })
  )

/** A regular file this process may execute. */
export const isExecutable = (file: string): boolean => {
  try {
    fs.accessSync(file, fs.constants.X_OK)
    return fs.statSync(file).isFile()
  } catch {
    return false
  }
}

/** The directories of `PATH`, in order. */
const pathDirectories = (): Array<string> => (process.env.PATH ?? "").split(path.delimiter).filter((dir) => dir !== "")

/**
 * An executable: `$variable` when it is set (and then only it: a value that is not an executable
 * file fails), else the first of `names` in `before`, then on `PATH`, then in `after`.
 */
export const findExecutable = (
  names: ReadonlyArray<string>,
  options?: {
    readonly variable?: string | undefined
    readonly before?: ReadonlyArray<string> | undefined
    readonly after?: ReadonlyArray<string> | undefined
  }
): Effect.Effect<Option.Option<string>, ServerError> =>
  Effect.suspend(() => {
    const explicit = options?.variable === undefined ? undefined : process.env[options.variable]
    if (explicit !== undefined && explicit !== "") {
      return isExecutable(explicit)
        ? Effect.succeed(Option.some(explicit))
        : Effect.fail(new ServerError({ message: `${options!.variable}=${explicit} is not an executable file` }))
    }
    const dirs = [...(options?.before ?? []), ...pathDirectories(), ...(options?.after ?? [])]
    for (const name of names) {
      for (const dir of dirs) {
        const candidate = path.join(dir, name)
        if (isExecutable(candidate)) return Effect.succeed(Option.some(candidate))
      }
    }
    return Effect.succeed(Option.none())
  })

/** `findExecutable`, or a failure with `message` (what to install, what to set). */
export const requireExecutable = (
  names: ReadonlyArray<string>,
  message: string,
  options?: Parameters<typeof findExecutable>[1]
): Effect.Effect<string, ServerError> =>
  Effect.flatMap(
    findExecutable(names, options),
    Option.match({ onNone: () => Effect.fail(new ServerError({ message })), onSome: Effect.succeed })
  )

/** Whether the process has exited within `timeout` (one that could not be spawned counts). */
export const waitForExit = (child: ChildProcess, timeout: Duration.DurationInput): Effect.Effect<boolean> =>
  child.exitCode !== null || child.signalCode !== null
    ? Effect.succeed(true)
    : Effect.async<boolean>((resume) => {
      // a process that could not be spawned reports an error and may never exit
      const onExit = () => resume(Effect.succeed(true))
      child.once("exit", onExit)
      child.once("error", onExit)
      return Effect.sync(() => {
        child.off("exit", onExit)
        child.off("error", onExit)
      })
    }).pipe(Effect.timeoutTo({ duration: timeout, onTimeout: () => false, onSuccess: (exited) => exited }))

/** SIGTERM, then SIGKILL if the process is still there after `grace` (5 seconds unless given). */
export const stop = (child: ChildProcess, grace: Duration.DurationInput = "5 seconds"): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (child.exitCode !== null || child.signalCode !== null) return
    child.kill("SIGTERM")
    if (!(yield* waitForExit(child, grace))) {
      child.kill("SIGKILL")
      yield* waitForExit(child, "5 seconds")
    }
  })

/** The last lines a process wrote, for the message when it fails. */
export const tail = (output: ReadonlyArray<string>): string => output.join("").trim().split("\n").slice(-15).join("\n")

/** What `spawn` starts, and how it knows the server is up. */
export interface SpawnOptions {
  /** The server's name in messages (`redis-server`, `DynamoDB Local`). */
  readonly name: string
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly cwd?: string | undefined
  /** Succeeds once the server answers; tried every `interval` (100 ms) until `timeout`. */
  readonly ready: Effect.Effect<unknown, unknown>
  readonly interval?: Duration.DurationInput | undefined
  readonly timeout: Duration.DurationInput
  /** How long SIGTERM has before SIGKILL when the scope closes (5 seconds). */
  readonly grace?: Duration.DurationInput | undefined
  /** Also done if the test process exits without closing the scope (after the SIGKILL). */
  readonly onProcessExit?: (() => void) | undefined
}

/**
 * Spawns a server and waits until `ready` succeeds, failing at once if the process exits first (with
 * the last lines it wrote). The process is stopped when the scope closes, and killed if the test
 * process exits without closing it.
 */
export const spawn = (options: SpawnOptions): Effect.Effect<ChildProcess, ServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const output: Array<string> = []
    const child = yield* Effect.acquireRelease(
      Effect.try({
        try: () => spawnChild(options.command, options.args, { cwd: options.cwd, stdio: ["ignore", "pipe", "pipe"] }),
        catch: (cause) =>
          new ServerError({ message: `${options.command} could not be started: ${describe(cause)}`, cause })
      }),
      (child) => stop(child, options.grace)
    )
    // a last resort if the test process exits without closing the scope
    const killOnExit = () => {
      child.kill("SIGKILL")
      options.onProcessExit?.()
    }
    process.once("exit", killOnExit)
    yield* Effect.addFinalizer(() => Effect.sync(() => process.off("exit", killOnExit)))
    const keep = (chunk: Buffer) => {
      output.push(chunk.toString())
      if (output.length > 200) output.splice(0, output.length - 200)
    }
    child.stdout?.on("data", keep)
    child.stderr?.on("data", keep)
    child.on("error", (error) => output.push(String(error)))
    const exited = Effect.flatMap(
      waitForExit(child, Duration.infinity),
      () =>
        Effect.fail(
          new ServerError({
            message: `${options.name} exited with ${child.exitCode ?? child.signalCode} before it answered:\n${
              tail(output)
            }`
          })
        )
    )
    const ready = options.ready.pipe(
      Effect.retry(Schedule.spaced(options.interval ?? "100 millis").pipe(Schedule.upTo(options.timeout))),
      Effect.mapError((cause) =>
        new ServerError({
          message: `${options.name} did not answer within ${Duration.format(options.timeout)} (${describe(cause)}):\n${
            tail(output)
          }`,
          cause
        })
      )
    )
    yield* Effect.raceFirst(ready, exited)
    return child
  })
