extension EntitySchema {
    /// `value` as an error message shows it: at most 80 characters of it.
    static func brief(_ value: Value) -> String {
        let text = "\(value)"
        return text.count <= 80 ? text : "\(text.prefix(80))… (\(text.utf8.count) bytes)"
    }

    /// Checks one non-null value against an attribute: its type, NaN, and size limits.
    /// An `int` given for a `double` attribute is converted.
    /// - Returns: the value as it will be stored.
    @_spi(Backend) public func checkValue(_ value: Value, for attribute: Attribute) throws(StoreError) -> Value {
        var value = value
        if attribute.type == .double, case .int(let i) = value {
            value = .double(Double(i))
        }
        guard value.type == attribute.type else {
            throw StoreError(.typeMismatch, "attribute '\(name).\(attribute.name)' is \(attribute.type), "
                + "got \(value.type.map { "\($0)" } ?? "null") value \(Self.brief(value))")
        }
        switch value {
        case .double(let d) where d.isNaN:
            throw StoreError(.invalidValue, "attribute '\(name).\(attribute.name)' cannot store NaN")
        case .string(let s) where s.utf8.count > Limits.maxValueBytes:
            throw StoreError(.limitExceeded, "attribute '\(name).\(attribute.name)': string of "
                + "\(s.utf8.count) bytes is over the limit of \(Limits.maxValueBytes)")
        case .bytes(let b) where b.count > Limits.maxValueBytes:
            throw StoreError(.limitExceeded, "attribute '\(name).\(attribute.name)': \(b.count) bytes "
                + "is over the limit of \(Limits.maxValueBytes)")
        default:
            return value
        }
    }

    /// Checks a value given for the primary key and returns the key.
    @_spi(Backend) public func primaryKey(_ key: Value) throws(StoreError) -> PrimaryKey {
        try PrimaryKey(checkedKeyValue(key))
    }

    /// Checks a value given for the primary key (not null, of the key's type, within the key
    /// size limit) and returns it as stored, without encoding it.
    @_spi(Backend) public func checkedKeyValue(_ key: Value) throws(StoreError) -> Value {
        // An int for an int key, the common case, passes every check below.
        if case .int = key, primaryKeyType == .int { return key }
        let attribute = primaryKeyAttribute
        guard !key.isNull else {
            throw StoreError(.invalidValue, "primary key '\(name).\(primaryKey)' cannot be null")
        }
        let checked = try checkValue(key, for: attribute)
        if case .string(let s) = checked, s.utf8.count > Limits.maxStringKeyBytes {
            throw StoreError(.limitExceeded, "primary key of '\(name)' is \(s.utf8.count) UTF-8 bytes; at most "
                + "\(Limits.maxStringKeyBytes) are allowed")
        }
        return checked
    }

    /// Checks a record against the entity and returns it complete: every attribute present,
    /// defaults applied, optional attributes without a value set to null.
    /// - Throws: ``StoreError`` with `unknownAttribute`, `typeMismatch`, `invalidValue` (null for a
    ///   required attribute, NaN) or `limitExceeded`, naming the entity and attribute.
    @_spi(Backend) public func normalize(_ record: Record) throws(StoreError) -> Record {
        // A store's record of this entity (a copy between stores, an update), or a literal that
        // names every attribute in the schema's order: every attribute in place, so only its
        // values are checked, and its storage is kept unless a value must be converted (an int
        // for a double).
        if var values = record.values(inOrderOf: layout) {
            for position in values.indices where !fits(values[position], at: position) {
                values[position] = try checkSlot(values[position], for: attributes[position])
            }
            return Record(layout: layout, values: values)
        }
        var result: [Value] = []
        result.reserveCapacity(attributes.count)
        var matched = 0
        // A missing value is reported after an unknown name: a name the entity does not have is
        // most often the missing one misspelt.
        var missing: StoreError?
        for position in attributes.indices {
            if let given = record.value(ifPresent: attributes[position].name, at: position) {
                matched += 1
                result.append(fits(given, at: position) ? given : try checkSlot(given, for: attributes[position]))
            } else {
                do {
                    result.append(try checkSlot(attributes[position].defaultValue ?? .null, for: attributes[position]))
                } catch {
                    missing = missing ?? error
                    result.append(.null)
                }
            }
        }
        if matched != record.count {
            let unknown = record.attributeNames.filter { attribute(named: $0) == nil }.sorted()
            throw StoreError(.unknownAttribute, "entity '\(name)' has no attribute '\(unknown.first ?? "?")'")
        }
        if let missing { throw missing }
        return Record(layout: layout, values: result)
    }

    /// Whether the value fits the attribute at `position` as it is: the common case, checked
    /// without copying the attribute or the value. `false` when it must be converted (an int for
    /// a double) or is wrong, which ``checkSlot(_:for:)`` then converts or names.
    @inline(__always)
    private func fits(_ value: Value, at position: Int) -> Bool {
        value.isStoredAsIs(by: attributes[position].type, optional: attributes[position].isOptional) {
            attributes[position].name == primaryKey
        }
    }

    /// Checks the value an attribute is to hold (null only when optional; a primary key within
    /// its limit) and returns it as stored.
    @inline(__always)
    private func checkSlot(_ value: Value, for attribute: Attribute) throws(StoreError) -> Value {
        if value.isNull {
            guard attribute.isOptional else {
                throw StoreError(.invalidValue, "attribute '\(name).\(attribute.name)' is required but has no value")
            }
            return value
        }
        let checked = try checkValue(value, for: attribute)
        if case .string(let s) = checked, s.utf8.count > Limits.maxStringKeyBytes, attribute.name == primaryKey {
            throw StoreError(.limitExceeded, "primary key of '\(name)' is \(s.utf8.count) UTF-8 bytes; at most "
                + "\(Limits.maxStringKeyBytes) are allowed")
        }
        return checked
    }

    /// A text a filter looks for is at most ``Limits/maxValueBytes``, as a stored value is (one
    /// longer cannot be found, and the backends bind a text's length as 32 bits).
    private func checkSearchedText(_ text: String, _ attributeName: String) throws(StoreError) {
        let bytes = text.utf8.count
        guard bytes <= Limits.maxValueBytes else {
            throw StoreError(.limitExceeded, "the text looked for in '\(name).\(attributeName)' holds \(bytes) bytes, "
                + "past the limit of \(Limits.maxValueBytes) bytes a value holds")
        }
    }

    /// Checks a filter's attributes and values; returns it with values converted as stored.
    @_spi(Backend) public func validate(_ filter: Filter) throws(StoreError) -> Filter {
        switch filter {
        case .all:
            return .all
        case let .compare(attributeName, op, value):
            let attribute = try requireAttribute(attributeName)
            return .compare(attributeName, op, value.isNull ? .null : try checkValue(value, for: attribute))
        case let .among(attributeName, values):
            let attribute = try requireAttribute(attributeName)
            var checked: [Value] = []
            for value in values {
                checked.append(value.isNull ? .null : try checkValue(value, for: attribute))
            }
            return .among(attributeName, checked)
        case .isNull(let attributeName):
            _ = try requireAttribute(attributeName)
            return filter
        case let .hasPrefix(attributeName, text), let .contains(attributeName, text):
            let attribute = try requireAttribute(attributeName)
            guard attribute.type == .string else {
                throw StoreError(.typeMismatch, "attribute '\(name).\(attributeName)' is \(attribute.type); "
                    + "prefix and contains need a string attribute")
            }
            try checkSearchedText(text, attributeName)
            return filter
        case let .hasElement(attributeName, element):
            let attribute = try requireAttribute(attributeName)
            guard attribute.type == .string else {
                throw StoreError(.typeMismatch, "attribute '\(name).\(attributeName)' is \(attribute.type); "
                    + "an element is looked for in a string attribute holding a JSON array")
            }
            if case .string(let text) = element { try checkSearchedText(text, attributeName) }
            switch element {
            case .null, .bool, .int, .double, .string: return filter
            default:
                throw StoreError(.typeMismatch, "the element looked for in '\(name).\(attributeName)' is \(element), "
                    + "not a JSON scalar (Field.hasElement makes one of any value)")
            }
        case .and(let filters):
            var checked: [Filter] = []
            for f in filters { checked.append(try validate(f)) }
            return .and(checked)
        case .or(let filters):
            var checked: [Filter] = []
            for f in filters { checked.append(try validate(f)) }
            return .or(checked)
        case .not(let inner):
            return .not(try validate(inner))
        case .any(let relationship, _), .relatedCount(let relationship, _, _):
            throw StoreError(.invalidArgument, "filter over relationship '\(name).\(relationship)' must be "
                + "resolved by a store's accessor")
        }
    }

    /// Checks sort keys: the attributes exist, and case folding is asked only of strings.
    @_spi(Backend) public func validate(_ sort: [SortKey]) throws(StoreError) {
        for key in sort {
            let attribute = try requireAttribute(key.attribute)
            if key.caseInsensitive, attribute.type != .string {
                throw StoreError(.typeMismatch, "case-insensitive sort on '\(name).\(key.attribute)', which is "
                    + "\(attribute.type), not string")
            }
        }
    }

    func requireAttribute(_ attributeName: String) throws(StoreError) -> Attribute {
        guard let attribute = attribute(named: attributeName) else {
            throw StoreError(.unknownAttribute, "entity '\(name)' has no attribute '\(attributeName)'")
        }
        return attribute
    }
}
