package tools

import (
	"strconv"

	"github.com/crux-go/crux/internal/codec"
)

// AppendJSON writes the answer of query_facts as encoding/json writes it,
// field for field, without reflection (as query's does). It reports false
// for an answer with an audit envelope, which encoding/json writes, and
// for a number JSON cannot hold.
func (o QueryFactsOutput) AppendJSON(b []byte) ([]byte, bool) {
	if o.Envelope != nil {
		return b, false
	}
	ok := true
	b = append(b, '{')
	if o.Contract != "" {
		b = append(codec.AppendString(append(b, `"contract":`...), o.Contract), ',')
	}
	if o.Kind != "" {
		b = append(codec.AppendString(append(b, `"kind":`...), o.Kind), ',')
	}
	b = append(b, `"rows":`...)
	if o.Rows == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range o.Rows {
			if i > 0 {
				b = append(b, ',')
			}
			var good bool
			b, good = o.Rows[i].AppendJSON(b)
			ok = ok && good
		}
		b = append(b, ']')
	}
	b = strconv.AppendInt(append(b, `,"count":`...), int64(o.Count), 10)
	b = strconv.AppendInt(append(b, `,"filtered_below_threshold":`...), int64(o.FilteredBelowThreshold), 10)
	b = strconv.AppendInt(append(b, `,"total_tokens":`...), int64(o.TotalTokens), 10)
	b = strconv.AppendBool(append(b, `,"truncated_by_token_budget":`...), o.TruncatedByTokenBudget)
	return append(b, '}'), ok
}

// AppendJSON writes r as encoding/json writes it, without reflection; it
// reports false for a number JSON cannot hold.
func (r *FactRow) AppendJSON(b []byte) ([]byte, bool) {
	ok := true
	num := func(key string, f float64) {
		var good bool
		b, good = codec.AppendFloat(append(b, key...), f)
		ok = ok && good
	}
	str := func(key, s string) { b = codec.AppendString(append(b, key...), s) }
	str(`{"fact_id":`, r.FactID)
	str(`,"entity":`, r.Entity)
	str(`,"key":`, r.Key)
	str(`,"value":`, r.Value)
	num(`,"confidence":`, r.Confidence)
	num(`,"effective_confidence":`, r.EffectiveConfidence)
	str(`,"horizon_class":`, r.HorizonClass)
	str(`,"freshness":`, r.Freshness)
	num(`,"age_hours":`, r.AgeHours)
	str(`,"stored_at":`, r.StoredAt)
	b = strconv.AppendUint(append(b, `,"version":`...), uint64(r.Version), 10)
	if r.Private {
		b = append(b, `,"private":true`...)
	}
	if r.SupersededBy != "" {
		str(`,"superseded_by":`, r.SupersededBy)
	}
	if r.WrittenBy != "" {
		str(`,"written_by":`, r.WrittenBy)
	}
	num(`,"score":`, r.Score)
	if r.ValueBytes != 0 {
		b = strconv.AppendInt(append(b, `,"value_bytes":`...), int64(r.ValueBytes), 10)
	}
	return append(b, '}'), ok
}
