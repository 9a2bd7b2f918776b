import Foundation
import Synchronization

/// The attribute a key path of a ``DataObject`` names, found without a macro: the type is
/// decoded once per stored property from a probe that gives every property a base value and
/// one property another (`0` and `1`, `""` and `"a"`, `false` and `true`, the first and second
/// case of a `CaseIterable` enum, `nil` and a value for an optional, an empty array or set and one
/// of one element); a key path's attribute is
/// the property whose change changes the value the key path reads. The objects are kept per
/// type, so each type is probed once per process.
///
/// A key path the probe cannot tell apart (a computed property, a property of a type the probe
/// has only one value of, a path into a nested struct) is an `invalidArgument` error when the
/// request runs, naming the type.
enum KeyPathNames {
    private struct Probed: @unchecked Sendable {
        // Objects of one DataObject type, only ever read after they are stored; the type is
        // Sendable itself (DataObject refines Sendable), the box only erases it.
        let names: [String]
        let base: Any
        let changed: [Any]
    }

    private static let cache = Mutex<[ObjectIdentifier: Probed]>([:])

    static func name<T: DataObject>(of keyPath: PartialKeyPath<T>) throws(StoreError) -> String {
        // A computed property reads stored ones; only a struct's stored properties have an offset.
        if !(T.self is AnyClass), MemoryLayout<T>.offset(of: keyPath) == nil { throw unknown(T.self) }
        let probed: Probed
        if let known = cache.withLock({ $0[ObjectIdentifier(T.self)] }) {
            probed = known
        } else {
            probed = try probe(T.self)
            cache.withLock { $0[ObjectIdentifier(T.self)] = probed }
        }
        guard let base = probed.base as? T else { throw unknown(T.self) }
        let value = comparable(base[keyPath: keyPath])
        let changing = probed.changed.indices.filter { index in
            guard let object = probed.changed[index] as? T else { return false }
            return comparable(object[keyPath: keyPath]) != value
        }
        guard changing.count == 1, let index = changing.first else { throw unknown(T.self) }
        return probed.names[index]
    }

    private static func unknown<T>(_ type: T.Type) -> StoreError {
        StoreError(.invalidArgument, "a key path of \(T.self) names no stored property the probe can tell apart "
            + "(a computed property, a path into a nested value, or an enum with one case): name the attribute "
            + "as a string instead")
    }

    private static func comparable(_ value: Any) -> AnyHashable {
        (value as? AnyHashable) ?? AnyHashable(String(reflecting: value))
    }

    private static func probe<T: DataObject>(_ type: T.Type) throws(StoreError) -> Probed {
        do {
            let names = NameLog()
            let base = try T(from: KeyPathProbeDecoder(changing: nil, names: names))
            var changed: [Any] = []
            for index in names.names.indices {
                changed.append(try T(from: KeyPathProbeDecoder(changing: index, names: NameLog())))
            }
            return Probed(names: names.names, base: base, changed: changed)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.invalidArgument, "\(T.self) cannot be probed for its key paths: \(error)")
        }
    }
}

/// The property names in the order the type decodes them.
final class NameLog {
    var names: [String] = []
}

/// Decodes a model with base values, except the property at `changing`, which gets another.
struct KeyPathProbeDecoder: Decoder {
    let changing: Int?
    let names: NameLog
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(KeyPathProbeContainer<Key>(changing: changing, names: names,
                                                          counter: ProbeCounter()))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { EmptyUnkeyedContainer() }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { ShapeSingleValue(log: ShapeLog()) }

    /// The base or the other value of `T`.
    static func value<T: Decodable>(_ type: T.Type, other: Bool) throws -> T {
        let value: Any?
        switch type {
        case is Bool.Type: value = other
        case is Int.Type: value = Int(other ? 1 : 0)
        case is Int64.Type: value = Int64(other ? 1 : 0)
        case is Int32.Type: value = Int32(other ? 1 : 0)
        case is Int16.Type: value = Int16(other ? 1 : 0)
        case is Int8.Type: value = Int8(other ? 1 : 0)
        case is UInt.Type: value = UInt(other ? 1 : 0)
        case is UInt64.Type: value = UInt64(other ? 1 : 0)
        case is UInt32.Type: value = UInt32(other ? 1 : 0)
        case is UInt16.Type: value = UInt16(other ? 1 : 0)
        case is UInt8.Type: value = UInt8(other ? 1 : 0)
        case is Double.Type: value = Double(other ? 1 : 0)
        case is Float.Type: value = Float(other ? 1 : 0)
        case is String.Type: value = other ? "a" : ""
        case is Data.Type: value = other ? Data([1]) : Data()
        case is [UInt8].Type: value = other ? [UInt8(1)] : []
        case is Date.Type: value = Date(timeIntervalSince1970: other ? 1 : 0)
        case is UUID.Type: value = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, other ? 1 : 0))
        default:
            if let cases = T.self as? any CaseIterable.Type {
                value = nthCase(cases, other ? 1 : 0)
            } else {
                value = nil
            }
        }
        if let value = value as? T { return value }
        // An array or set: empty, or with one element, so that a key path to it is told apart.
        if other, let one = try? T(from: OneElementDecoder()) { return one }
        return try ShapeDecoder.placeholder(type, log: ShapeLog())
    }

    private static func nthCase<C: CaseIterable>(_ type: C.Type, _ n: Int) -> Any? {
        let cases = Array(type.allCases)
        return n < cases.count ? cases[n] : cases.first
    }
}

/// Decodes a collection of one base element (an array's or a set's other probe value).
struct OneElementDecoder: Decoder {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(PlaceholderContainer<Key>())
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { OneElementContainer() }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { ShapeSingleValue(log: ShapeLog()) }

    struct OneElementContainer: UnkeyedDecodingContainer {
        var codingPath: [any CodingKey] { [] }
        var count: Int? { 1 }
        var isAtEnd: Bool { currentIndex > 0 }
        var currentIndex = 0

        mutating func decodeNil() throws -> Bool { false }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            currentIndex += 1
            return try KeyPathProbeDecoder.value(type, other: false)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type)
            throws -> KeyedDecodingContainer<NestedKey> {
            currentIndex += 1
            return KeyedDecodingContainer(PlaceholderContainer<NestedKey>())
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            currentIndex += 1
            return EmptyUnkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder { ShapeDecoder(log: ShapeLog()) }
    }
}

/// The index of the next property a probe container decodes.
final class ProbeCounter {
    var next = 0
}

struct KeyPathProbeContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let changing: Int?
    let names: NameLog
    let counter: ProbeCounter
    var codingPath: [any CodingKey] { [] }
    var allKeys: [Key] { [] }

    func contains(_ key: Key) -> Bool { true }

    /// Notes the property and says whether it is the one to change.
    private func isChanged(_ key: Key) -> Bool {
        names.names.append(key.stringValue)
        defer { counter.next += 1 }
        return counter.next == changing
    }

    func decodeNil(forKey key: Key) throws -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try KeyPathProbeDecoder.value(type, other: isChanged(key))
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        isChanged(key) ? try KeyPathProbeDecoder.value(type, other: true) : nil
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type,
                                               forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        _ = isChanged(key)
        return KeyedDecodingContainer(PlaceholderContainer<NestedKey>())
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        _ = isChanged(key)
        return EmptyUnkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { ShapeDecoder(log: ShapeLog()) }
    func superDecoder(forKey key: Key) throws -> any Decoder { ShapeDecoder(log: ShapeLog()) }
}
