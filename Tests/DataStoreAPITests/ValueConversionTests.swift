import DataStoreAPI
import Foundation
import Testing

/// Dates at the ends of the Int64 microsecond range convert to text and back without trapping
/// (the floor division of `iso8601` overflowed at `Int64.min`; the JSON Lines codec's edge test
/// found it).
@Test(arguments: [Int64.min, .min + 1, -1, 0, 1, 999_999, -999_999, -1_000_000, .max - 1, .max])
func datesAtTheEdgesConvertToTextWithoutTrapping(_ micros: Int64) {
    let timestamp = Timestamp(microsecondsSinceEpoch: micros)
    let text = ValueConversion.iso8601Text(timestamp)
    #expect(text.hasSuffix("Z"))
    #expect(ValueConversion.convert(.date(timestamp), to: .string) == .string(text))
    // Inside years 1 to 9999 the text reads back to the same instant.
    if micros > -62_135_596_800_000_000 && micros < 253_402_300_800_000_000 {
        #expect(ValueConversion.parseISO8601Text(text) == timestamp, "\(text)")
    }
}
