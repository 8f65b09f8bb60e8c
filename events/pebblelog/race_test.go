//go:build race

package pebblelog_test

// raceEnabled is set under -race (this file's build tag).
const raceEnabled = true
