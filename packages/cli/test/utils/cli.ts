/**
 * The CLI as a user runs it: `node dist/bin.js` (built by the global setup) in a process of its
 * own, with a time limit, its exit code, its output and, for `--json`, the JSON it printed. And the
 * tests' own scripts, run as processes of their own from the TypeScript sources.
 */
import { Children } from "@effect-idempotency/test-support"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { spawn } from "node:child_process"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

/** The built executable. */
export const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "dist", "bin.js")

export interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  /** How long the process ran, in milliseconds. */
  readonly millis: number
}

/**
 * Runs `effect-idempotency ...args` and waits for it to exit (killed after `timeout`). The
 * environment is the test's, without the store variables unless `env` sets them.
 */
export const cli = (
  args: ReadonlyArray<string>,
  options?: { readonly env?: Record<string, string> | undefined; readonly timeoutMillis?: number | undefined }
): Effect.Effect<Run> =>
  Effect.async<Run>((resume) => {
    const started = performance.now()
    const child = spawn(process.execPath, [bin, ...args], {
      env: childEnv(options?.env),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => stdout += chunk.toString())
    child.stderr.on("data", (chunk: Buffer) => stderr += chunk.toString())
    const timer = setTimeout(() => child.kill("SIGKILL"), options?.timeoutMillis ?? 30_000)
    child.on("close", (code) => {
      clearTimeout(timer)
      resume(Effect.succeed({ code, stdout, stderr, millis: performance.now() - started }))
    })
    return Effect.sync(() => {
      clearTimeout(timer)
      child.kill("SIGKILL")
    })
  })

/** The variables the CLI reads to name a store, which a child inherits only from `env`. */
const STORE_VARIABLES = [
  "DATABASE_URL",
  "REDIS_URL",
  "AWS_REGION",
  "DYNAMODB_ENDPOINT",
  "IDEMPOTENCY_TABLE",
  "LIBSQL_AUTH_TOKEN"
]

/** The environment of a child process: the test's, without the store variables, and `env`. */
const childEnv = (env: Record<string, string> | undefined): Record<string, string | undefined> => {
  const inherited: Record<string, string | undefined> = { ...process.env }
  for (const name of STORE_VARIABLES) delete inherited[name]
  return { ...inherited, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "true", ...env }
}

/** A script running in a process of its own. */
export interface Script {
  /** What it printed on stdout so far. */
  readonly stdout: () => string
  /** What it printed on stderr so far. */
  readonly stderr: () => string
  readonly kill: (signal: NodeJS.Signals) => void
  /** Its end: the exit code, or the signal that ended it. */
  readonly exited: Effect.Effect<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

/**
 * Starts a TypeScript script of the tests (`node --conditions=source --import tsx`) with the
 * environment `cli` gives the CLI; it is killed (SIGKILL) when the scope closes, if it still runs.
 */
export const script = (
  file: string,
  args: ReadonlyArray<string>,
  options?: { readonly env?: Record<string, string> | undefined }
): Effect.Effect<Script, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync((): Script => {
      const child = Children.start(file, args, { env: childEnv(options?.env), stdio: ["ignore", "pipe", "pipe"] })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (chunk: Buffer) => stdout += chunk.toString())
      child.stderr.on("data", (chunk: Buffer) => stderr += chunk.toString())
      const exited = new Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>(
        (resolve) => child.once("exit", (code, signal) => resolve({ code, signal }))
      )
      return {
        stdout: () => stdout,
        stderr: () => stderr,
        kill: (signal) => void child.kill(signal),
        exited: Effect.promise(() => exited)
      }
    }),
    (script) => Effect.sync(() => script.kill("SIGKILL"))
  )

/** The JSON object a `--json` run printed on stdout. */
export const parsed = (run: Run): any => {
  try {
    return JSON.parse(run.stdout)
  } catch {
    throw new Error(`not JSON (exit ${run.code}): ${run.stdout}\n${run.stderr}`)
  }
}

/** The exit codes the tests expect, as the README documents them. */
export const Code = { Ok: 0, Usage: 1, Refused: 2, Unavailable: 3, NotFound: 4, StoreError: 5 } as const
