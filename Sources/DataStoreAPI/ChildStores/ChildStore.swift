/// A store whose writes stay in an overlay until its parent merges them (``DataStore/makeChild()``):
/// its reads see the parent's current data with the overlay applied.
public final class ChildStore: Store, @unchecked Sendable {
    let overlay: OverlayEngine

    init(parent: any DataStore) throws {
        overlay = OverlayEngine(parent: parent)
        try super.init(engine: overlay, gated: false)
    }
}
