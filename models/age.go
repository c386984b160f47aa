package models

import (
	"fmt"
	"time"
)

var smallNumbers = [...]string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}

// SpellNumber spells 0…10 in words ("two") and writes larger numbers in digits.
func SpellNumber(n int) string {
	if n >= 0 && n < len(smallNumbers) {
		return smallNumbers[n]
	}
	return fmt.Sprint(n)
}

// SpokenAge says how long ago something happened, for a listener:
//
//	d < 10 s      "just now" (also for negative d: a clock ahead of ours)
//	d < 60 s      "N seconds ago"
//	d < 60 min    "a minute ago" / "N minutes ago"
//	d < 24 h      "an hour ago" / "N hours ago"
//	d < 48 h      "yesterday"
//	otherwise     "N days ago"
//
// Numbers one to ten are spelled out ("two days ago").
func SpokenAge(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return "just now"
	case d < time.Minute:
		return SpellNumber(int(d/time.Second)) + " seconds ago"
	case d < time.Hour:
		if n := int(d / time.Minute); n > 1 {
			return SpellNumber(n) + " minutes ago"
		}
		return "a minute ago"
	case d < 24*time.Hour:
		if n := int(d / time.Hour); n > 1 {
			return SpellNumber(n) + " hours ago"
		}
		return "an hour ago"
	case d < 48*time.Hour:
		return "yesterday"
	default:
		return SpellNumber(int(d/(24*time.Hour))) + " days ago"
	}
}
