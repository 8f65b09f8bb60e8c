//go:build race

package verified_test

// raceEnabled is set under -race (this file's build tag): the concurrent
// tests scale their loops down.
const raceEnabled = true
