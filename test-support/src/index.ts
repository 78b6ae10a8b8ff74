/**
 * The test infrastructure the workspace's tests, examples and benchmarks share, kept in one place
 * instead of copied into each package's `test/utils`. Private: never published, never documented.
 */

/**
 * Free ports, executables, and servers spawned, awaited and stopped with their scope.
 */
export * as Servers from "./Servers.js"
