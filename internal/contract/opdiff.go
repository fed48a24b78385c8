package contract

import (
	"regexp"
)

// Operation-level change classes: what the HTTP contract promises beyond its schemas
// that oasdiff does not judge.
var (
	odParamSerialization = Rule{"OD001", "parameter-serialization-changed", "a parameter's style, explode or allowReserved changed: the same value is sent differently"}
)

// templateParam matches a path template parameter; operations are matched across
// versions by method and path with parameter names erased, so that a renamed path
// parameter is reported as an input change instead of a removed route.
var templateParam = regexp.MustCompile(`\{[^}]*\}`)

func opKey(op *Operation) string {
	return op.Method + " " + templateParam.ReplaceAllString(op.Path, "{}")
}

// diffOperations applies the project's input and output rules (the TD/TS classes that
// judge schemas) to every operation that no tool of both versions covers: admin routes,
// and every route when only the OpenAPI documents are compared. So a schema change is
// judged the same way with or without the registry, and reported once. It also runs
// the operation-level classes on every operation.
func diffOperations(base, rev *Contract) []Change {
	covered := map[string]bool{}
	if base.Reg != nil && rev.Reg != nil {
		for _, bt := range base.Tools {
			if bt.Op == nil {
				continue
			}
			for _, rt := range rev.Tools {
				if rt.Op != nil && rt.OperationID == bt.OperationID {
					covered[bt.OperationID] = true
				}
			}
		}
	}
	revByKey := map[string]*Operation{}
	for _, op := range rev.Ops {
		revByKey[opKey(op)] = op
	}
	d := &toolDiffer{source: "openapi"}
	for _, bo := range base.Ops {
		ro := rev.OpByID[bo.ID]
		if ro == nil || bo.ID == "" {
			ro = revByKey[opKey(bo)] // an operationId change is oasdiff's api-operation-id-removed
		}
		if ro == nil {
			continue // a removed route is oasdiff's
		}
		subject := bo.ID
		if subject == "" {
			subject = bo.Method + " " + bo.Path
		}
		d.params(subject, bo, ro)
		if covered[bo.ID] && bo.ID != "" {
			continue
		}
		if bo.Input != nil && ro.Input != nil {
			d.input(subject, "", bo.Input, ro.Input, 0)
		}
		if bo.Output != nil && ro.Output != nil {
			d.output(subject, "", bo.Output, ro.Output, 0)
		}
	}
	return d.out
}

// serialization is how a parameter value goes on the wire (OpenAPI 3.0 §4.7.12.2:
// style defaults to form in query and cookie, simple in path and header; explode
// defaults to true for form only).
func serialization(p Param) (style string, explode, reserved bool) {
	style, _ = p.Obj["style"].(string)
	if style == "" {
		style = "simple"
		if p.In == "query" || p.In == "cookie" {
			style = "form"
		}
	}
	explode = style == "form"
	if e, ok := p.Obj["explode"].(bool); ok {
		explode = e
	}
	reserved, _ = p.Obj["allowReserved"].(bool)
	return style, explode, reserved
}

func (d *toolDiffer) params(subject string, bo, ro *Operation) {
	revParams := map[string]Param{}
	for _, p := range ro.Params {
		revParams[p.In+"\x00"+p.Name] = p
	}
	for _, bp := range bo.Params {
		rp, ok := revParams[bp.In+"\x00"+bp.Name]
		if !ok {
			continue
		}
		bs, be, br := serialization(bp)
		rs, re, rr := serialization(rp)
		if bs != rs || be != re || br != rr {
			d.add(odParamSerialization, subject, bp.Name, "%s parameter %s: style %s explode %v allowReserved %v became style %s explode %v allowReserved %v",
				bp.In, bp.Name, bs, be, br, rs, re, rr)
		}
	}
}
