package commands

import (
	"fmt"
	"maps"

	"github.com/greffe/greffe/events"
)

// joinProblems returns the error of a command with problems: the only one
// as it is, or, when there are several, the first one's code, field and
// sentence (with how many more there are) and, in details.problems, each
// problem's code, field and message, in the order prepare found them.
// The first problem stays in the chain (errors.As finds it).
//
// REQUIRES: problems is not empty and each is events.Coded.
func joinProblems(problems []error) error {
	if len(problems) == 1 {
		return problems[0]
	}
	list := make([]map[string]any, 0, len(problems))
	var first *events.Error
	for _, p := range problems {
		d, ok := events.AsCoded(p)
		if !ok {
			d = &events.Error{Code: CodeInvalidCommand, Kind: events.KindRefused, Message: p.Error()}
		}
		if first == nil {
			first = d
		}
		item := map[string]any{"code": d.Code, "message": d.Message}
		if d.Field != "" {
			item["field"] = d.Field
		}
		list = append(list, item)
	}
	details := maps.Clone(first.Details)
	if details == nil {
		details = map[string]any{}
	}
	details["problems"] = list
	more := "1 more problem"
	if len(problems) > 2 {
		more = fmt.Sprintf("%d more problems", len(problems)-1)
	}
	return &events.Error{Code: first.Code, Kind: first.Kind, Field: first.Field, Details: details, Err: problems[0],
		Message: fmt.Sprintf("%s (and %s: see details.problems)", first.Message, more)}
}
