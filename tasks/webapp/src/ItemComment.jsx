// The optional comment box under each item, on the pages of a study with item comments (design.item_comments:
// the payload's `item_comments`). What the rater types is kept in the draft with her answers (useTask.js) and sent
// as the item's entry's `comment`; an empty box sends none. Its text is React text, never HTML.
export const MAX_ITEM_COMMENT = 2000; // as the server caps it (server/annotation/item_comments.py)

/** The item's comment: `value` as typed; `noun` names the item ("response", "pair"). */
export default function ItemComment({ value, onChange, noun }) {
  return (
    <div className="card item-comment">
      <label htmlFor="item-comment">Comment on this {noun} (optional)</label>
      <textarea id="item-comment" rows={2} maxLength={MAX_ITEM_COMMENT} value={value}
                onChange={(e) => onChange(e.target.value)} />
    </div>
  );
}

/** The entry's `comment` field for the item at `i`: the trimmed text when the study takes item comments and the
 * box holds any, else nothing. */
export function itemCommentField(assignment, itemComments, i) {
  const text = assignment.item_comments === true && itemComments ? (itemComments[i] || "").trim() : "";
  return text ? { comment: text } : {};
}
